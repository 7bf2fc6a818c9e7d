// Package register gives the agent its credential on the manager: the one it stored, or a new
// one obtained by registering with the bootstrap token Secret, and keeps it renewed. (agent)
package register

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/record"

	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Options configure registration.
type Options struct {
	// Namespace is the agent's namespace downstream (its Secrets and ConfigMap).
	Namespace string
	// ClientID overrides the agent's identity (default: the kube-system namespace's UID, or the
	// clientID of the agent ConfigMap).
	ClientID string
	// Labels are added to the agent ConfigMap's labels for the Cluster made at registration.
	Labels map[string]string
	// PollInterval is how often the agent looks for its credential after asking; Timeout is how
	// long it waits for it (Fleet's agents wait up to 30 minutes).
	PollInterval, Timeout time.Duration
	// APIServerURL and APIServerCA, when set, say where the manager is now: they win over the
	// stored credential's (the manager hands them out through the agent's own Bundle).
	APIServerURL, APIServerCA string
	// TLSMode is TLSSystemStore (the default) or TLSStrict.
	TLSMode string
}

// Credential is the agent's identity on the manager and where its cluster lives there. SA and
// SANamespace name its ServiceAccount there; a credential without SANamespace (Fleet's, which
// names no ServiceAccount, or one this manager issued before agent identities moved to
// registration.AgentIdentityNamespace) is traded for one of the agent identity first thing.
type Credential struct {
	Token, APIServerURL, APIServerCA                      string
	ClusterNamespace, ClusterName, ClusterObjectNamespace string
	SA, SANamespace                                       string
	// RegistrationKey, given with the credential, proves a later registration of this cluster is
	// its own (registration.KeyHashAnnotation); it is kept in registration.KeySecret.
	RegistrationKey string
}

// toTrade says the credential is not of the agent identity the manager now gives.
func (c Credential) toTrade() bool { return c.SANamespace == "" }

// traded names the credential traded: Fleet's, or this manager's earlier one.
func (c Credential) traded() string {
	if c.SA == "" {
		return "the credential Fleet stored"
	}
	return "the credential of the earlier agent identity (" + c.ClusterNamespace + "/" + c.SA + ")"
}

// ErrNoBootstrap: neither a stored credential nor a bootstrap Secret.
var ErrNoBootstrap = errors.New("no credential (Secret " + registration.AgentSecret + ") and no registration token (Secret " + registration.BootstrapSecret + ")")

// Obtain returns the agent's stored credential, registering first when it has none. It retries
// with backoff (a token may be applied later, the manager may be down) until ctx ends; each
// failure is logged with its cause. Each wait is drawn at random between a tenth of the
// backoff's step and the step (spread): agents that failed together (thousands registering at
// once, refused with 429 when the apiserver's writes in flight are full) would otherwise retry
// together and meet the same refusal again.
//
// Each failure is also recorded as a Warning Event (reason RegistrationFailed) on the
// registration token's Secret in the agent's own cluster, so `kubectl get events` there says why
// the agent is not registered while it cannot reach the manager at all.
func Obtain(ctx context.Context, local kubernetes.Interface, o Options) (*Credential, error) {
	backoff := wait.Backoff{Duration: registerRetry, Factor: 2, Steps: 1 << 30, Cap: registerRetryCap}
	events := record.NewBroadcaster(record.WithContext(ctx))
	defer events.Shutdown()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: local.CoreV1().Events(o.Namespace)})
	rec := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "fleet-agent"})
	token := &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: o.Namespace, Name: registration.BootstrapSecret}
	for {
		c, err := Stored(ctx, local, o.Namespace)
		if err == nil && c != nil {
			return c, nil
		}
		if err == nil {
			if c, err = Register(ctx, local, o); err == nil {
				return c, nil
			}
		}
		logrus.WithError(err).Error("registering with the manager")
		rec.Eventf(token, corev1.EventTypeWarning, "RegistrationFailed", "registering with the manager: %v", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(spread(backoff.Step())):
		}
	}
}

// spread is a wait drawn uniformly from [step/10, step): retries of agents that failed at the
// same moment spread over the whole step instead of arriving together.
func spread(step time.Duration) time.Duration {
	return wait.Jitter(step/10, 9)
}

// Stored returns the credential the agent stored, or nil when it has none.
func Stored(ctx context.Context, local kubernetes.Interface, ns string) (*Credential, error) {
	s, err := local.CoreV1().Secrets(ns).Get(ctx, registration.AgentSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading secret %s/%s: %w", ns, registration.AgentSecret, err)
	}
	d := s.Data
	if len(d[registration.KeyToken]) == 0 && len(d[registration.KeyDeploymentNamespace]) > 0 {
		return fromFleet(ns, d)
	}
	c := &Credential{Token: string(d[registration.KeyToken]), APIServerURL: string(d[registration.KeyAPIServerURL]),
		APIServerCA: string(d[registration.KeyAPIServerCA]), ClusterNamespace: string(d[registration.KeyClusterNamespace]),
		ClusterName: string(d[registration.KeyClusterName]), ClusterObjectNamespace: string(d[registration.KeyClusterObjectNamespace]),
		SA: string(d[registration.KeyServiceAccount]), SANamespace: string(d[registration.KeyServiceAccountNamespace])}
	if c.Token == "" || c.APIServerURL == "" || c.ClusterNamespace == "" {
		return nil, fmt.Errorf("secret %s/%s: token, apiServerURL and clusterNamespace are required", ns, registration.AgentSecret)
	}
	return c, nil
}

// fromFleet reads the credential a Fleet agent stored: a kubeconfig whose context namespace is
// the cluster namespace, with deploymentNamespace (that namespace), clusterNamespace (the
// Cluster's own namespace) and clusterName beside it. It has no ServiceAccount: Renew trades it
// for this manager's expiring credential first thing.
func fromFleet(ns string, d map[string][]byte) (*Credential, error) {
	where := fmt.Sprintf("secret %s/%s (written by Fleet)", ns, registration.AgentSecret)
	kc, err := clientcmd.Load(d[registration.KeyKubeconfig])
	if err != nil {
		return nil, fmt.Errorf("%s, key %s: %w", where, registration.KeyKubeconfig, err)
	}
	ctx := kc.Contexts[kc.CurrentContext]
	if ctx == nil || kc.Clusters[ctx.Cluster] == nil || kc.AuthInfos[ctx.AuthInfo] == nil {
		return nil, fmt.Errorf("%s, key %s: the current context names no cluster or user", where, registration.KeyKubeconfig)
	}
	cluster, user := kc.Clusters[ctx.Cluster], kc.AuthInfos[ctx.AuthInfo]
	c := &Credential{Token: user.Token, APIServerURL: cluster.Server, APIServerCA: string(cluster.CertificateAuthorityData),
		ClusterNamespace: string(d[registration.KeyDeploymentNamespace]), ClusterName: string(d[registration.KeyClusterName]),
		ClusterObjectNamespace: string(d[registration.KeyClusterNamespace])}
	if c.Token == "" || c.APIServerURL == "" || c.ClusterName == "" {
		return nil, fmt.Errorf("%s: the kubeconfig's token and server and key %s are required", where, registration.KeyClusterName)
	}
	return c, nil
}

// agentConfig is the agent ConfigMap's "config" key.
type agentConfig struct {
	Labels   map[string]string `json:"labels,omitempty"`
	ClientID string            `json:"clientID,omitempty"`
}

// Register asks the manager for a credential with the bootstrap Secret's token, stores it and
// deletes the bootstrap Secret.
func Register(ctx context.Context, local kubernetes.Interface, o Options) (*Credential, error) {
	ns := o.Namespace
	v, boot, err := bootstrapValues(ctx, local, ns)
	if err != nil {
		return nil, err
	}
	clientID, labels, err := identity(ctx, local, o, boot.Data[registration.KeyLabels])
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{Host: v.APIServerURL, BearerToken: v.Token, TLSClientConfig: rest.TLSClientConfig{CAData: caData(v.APIServerCA, o.TLSMode)},
		Timeout: requestTimeout}
	nonce, err := pendingNonce(ctx, local, boot)
	if err != nil {
		return nil, err
	}
	reg, err := request(ctx, cfg, v, clientID, nonce, labels, spreadSleep)
	if err != nil {
		return nil, err
	}
	log := logrus.WithFields(logrus.Fields{"registration": v.ClusterNamespace + "/" + reg, "clientID": clientID})
	log.Info("asked the manager to register this cluster")
	secret, err := await(ctx, cfg, v, registration.CredentialSecret(clientID, nonce), o, log)
	if err != nil {
		if ctx.Err() == nil {
			// Not granted in all that time: the next try asks afresh.
			forgetNonce(ctx, local, ns)
		}
		return nil, fmt.Errorf("waiting for registration %s/%s to be granted: %w", v.ClusterNamespace, reg, err)
	}
	c := granted(secret.Data, v)
	if err := Store(ctx, local, ns, c); err != nil {
		return nil, err
	}
	if c.RegistrationKey != "" {
		if err := storeKey(ctx, local, ns, c.RegistrationKey); err != nil {
			// The credential works without it; only registering again will need an
			// administrator's allowance.
			logrus.WithError(err).Warn("keeping the registration key")
		}
	}
	if err := local.CoreV1().Secrets(ns).Delete(ctx, registration.BootstrapSecret, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deleting the registration token (secret %s/%s): %w", ns, registration.BootstrapSecret, err)
	}
	log.WithField("cluster", c.ClusterObjectNamespace+"/"+c.ClusterName).Info("registered; the registration token was deleted")
	return c, nil
}

// bootstrapValues reads the registration token's values from the bootstrap Secret, with their
// defaults, and the Secret (its key registration.KeyLabels holds the labels that go with the
// token, JSON, optional).
func bootstrapValues(ctx context.Context, local kubernetes.Interface, ns string) (registration.Values, *corev1.Secret, error) {
	var v registration.Values
	boot, err := local.CoreV1().Secrets(ns).Get(ctx, registration.BootstrapSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return v, nil, ErrNoBootstrap
	}
	if err != nil {
		return v, nil, fmt.Errorf("reading secret %s/%s: %w", ns, registration.BootstrapSecret, err)
	}
	d := boot.Data
	v = registration.Values{Token: string(d[registration.KeyToken]), APIServerURL: string(d[registration.KeyAPIServerURL]),
		APIServerCA: string(d[registration.KeyAPIServerCA]), ClusterNamespace: string(d[registration.KeyClusterNamespace]),
		SystemRegistrationNamespace: string(d[registration.KeySystemRegistrationNS]), RegistrationKey: string(d[registration.KeyRegistrationKey])}
	if v.RegistrationKey == "" {
		// An agent registering again presents the key of its earlier registration, if it kept it.
		v.RegistrationKey = storedKey(ctx, local, ns)
	}
	for key, val := range map[string]string{registration.KeyToken: v.Token, registration.KeyAPIServerURL: v.APIServerURL} {
		if val == "" {
			return v, nil, fmt.Errorf("secret %s/%s: key %s is empty", ns, registration.BootstrapSecret, key)
		}
	}
	if v.ClusterNamespace == "" {
		v.ClusterNamespace = fleet.DefaultNamespace
	}
	if v.SystemRegistrationNamespace == "" {
		v.SystemRegistrationNamespace = fleet.ClustersSystemNamespace
	}
	return v, boot, nil
}

// storedKey is the registration key of the agent's earlier registration ("" for none).
func storedKey(ctx context.Context, local kubernetes.Interface, ns string) string {
	s, err := local.CoreV1().Secrets(ns).Get(ctx, registration.KeySecret, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return string(s.Data[registration.KeyRegistrationKey])
}

// storeKey keeps the registration key given with a credential in registration.KeySecret.
func storeKey(ctx context.Context, local kubernetes.Interface, ns, key string) error {
	if err := putSecret(ctx, local, ns, registration.KeySecret, map[string][]byte{registration.KeyRegistrationKey: []byte(key)}); err != nil {
		return fmt.Errorf("storing the registration key in secret %s/%s: %w", ns, registration.KeySecret, err)
	}
	return nil
}

// pendingNonce is the nonce of the registration the agent asked for and has not got yet, kept in
// the bootstrap Secret (registration.KeyClientRandom), or a new one kept there before it is
// used. An agent whose request reached the manager but whose answer was lost (a timeout under
// load, a restart) asks again with the same nonce, so the same ClusterRegistration: with a new
// one, the manager granted the first (giving the Cluster a registration key only that grant's
// credential carries) and refused the second for good. The bootstrap Secret goes once the agent
// is registered, and the nonce with it. boot is the bootstrap Secret as this try read it.
func pendingNonce(ctx context.Context, local kubernetes.Interface, boot *corev1.Secret) (string, error) {
	ns := boot.Namespace
	secrets := local.CoreV1().Secrets(ns)
	s := boot.DeepCopy()
	// Only a nonce the agent could have drawn is used again: the Secret is writable downstream.
	if nonce := s.Data[registration.KeyClientRandom]; len(nonce) == 64 {
		if _, err := hex.DecodeString(string(nonce)); err == nil {
			return string(nonce), nil
		}
	}
	random := make([]byte, 32)
	if _, err := rand.Read(random); err != nil {
		return "", err
	}
	nonce := hex.EncodeToString(random)
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[registration.KeyClientRandom] = []byte(nonce)
	_, err := secrets.Update(ctx, s, metav1.UpdateOptions{})
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err):
		// An immutable Secret, or one the agent may not write: it registers as before, with
		// a nonce of this try only.
		logrus.WithError(err).Warn("the registration's nonce is not kept: a try whose answer is lost asks as a new registration")
	case err != nil:
		return "", fmt.Errorf("keeping the registration's nonce in secret %s/%s: %w", ns, registration.BootstrapSecret, err)
	}
	return nonce, nil
}

// forgetNonce drops the pending registration's nonce: the next registration asks afresh.
func forgetNonce(ctx context.Context, local kubernetes.Interface, ns string) {
	patch := []byte(`[{"op":"remove","path":"/data/` + registration.KeyClientRandom + `"}]`)
	if _, err := local.CoreV1().Secrets(ns).Patch(ctx, registration.BootstrapSecret, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil &&
		!apierrors.IsNotFound(err) && !apierrors.IsInvalid(err) {
		logrus.WithError(err).Warn("forgetting the registration's nonce")
	}
}

// identity is who the agent registers as: its clientID (the option, the agent ConfigMap's, or
// the kube-system namespace's UID) and the labels for its Cluster (the ConfigMap's, the
// option's, then the token's group labels).
func identity(ctx context.Context, local kubernetes.Interface, o Options, groupLabels []byte) (string, map[string]string, error) {
	cfg, err := readConfig(ctx, local, o.Namespace)
	if err != nil {
		return "", nil, err
	}
	clientID := o.ClientID
	if clientID == "" {
		clientID = cfg.ClientID
	}
	if clientID == "" {
		ks, err := local.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
		if err != nil {
			return "", nil, fmt.Errorf("reading the kube-system namespace (the cluster's identity): %w", err)
		}
		clientID = string(ks.UID)
	}
	labels := map[string]string{}
	maps.Copy(labels, cfg.Labels)
	maps.Copy(labels, o.Labels)
	if len(groupLabels) > 0 {
		var group map[string]string
		if err := json.Unmarshal(groupLabels, &group); err != nil {
			return "", nil, fmt.Errorf("secret %s/%s, key %s: %w", o.Namespace, registration.BootstrapSecret, registration.KeyLabels, err)
		}
		maps.Copy(labels, group)
	}
	return clientID, labels, nil
}

// request creates the ClusterRegistration that asks the manager for a credential and returns its
// name and the nonce in it. A request the apiserver refuses as one too many (429: its writes in
// flight are full, as when thousands of agents register at once) is sent again after a wait
// drawn with spread, first within createRetry, each next step twice as long, up to
// createRetryTries tries; then the error goes to Obtain, whose backoff is longer still.
// client-go's own retry is off for it: it sends a refused request again after exactly the one
// second the apiserver's Retry-After says, up to ten times, so agents refused together came back
// together, second after second (benchmarks/RESULTS.md, the storm from 5,000 to 10,000).
func request(ctx context.Context, cfg *rest.Config, v registration.Values, clientID, nonce string, labels map[string]string,
	sleep func(context.Context, time.Duration) bool) (string, error) {
	rc, err := registrationClient(cfg)
	if err != nil {
		return "", err
	}
	want := &fleet.ClusterRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: registration.RequestName(clientID, nonce), Namespace: v.ClusterNamespace},
		Spec:       fleet.ClusterRegistrationSpec{ClientID: clientID, ClientRandom: nonce, ClusterLabels: labels},
	}
	// Who the token is, so the manager knows which token's rules apply (the admission policy
	// checks the claim against the apiserver's own view of the request).
	want.Annotations = map[string]string{}
	if who := tokenSubject(v.Token); who != "" {
		want.Annotations[registration.RequesterAnnotation] = who
	}
	// The key the manager gave this cluster, if any: without it the manager grants no
	// registration for a Cluster that has one.
	if v.RegistrationKey != "" {
		want.Annotations[registration.KeyAnnotation] = v.RegistrationKey
	}
	backoff := wait.Backoff{Duration: createRetry, Factor: 2, Steps: math.MaxInt32}
	for try := 1; ; try++ {
		got := &fleet.ClusterRegistration{}
		err = rc.Post().Namespace(v.ClusterNamespace).Resource(fleet.ClusterRegistrationResourceName).Body(want).
			MaxRetries(0).Do(ctx).Into(got)
		if err == nil || apierrors.IsAlreadyExists(err) {
			// Existing: this agent's own request of an earlier try, whose answer was lost.
			return want.Name, nil
		}
		if !apierrors.IsTooManyRequests(err) || try >= createRetryTries || !sleep(ctx, backoff.Step()) {
			return "", tokenError(v.APIServerURL, err)
		}
	}
}

// fleetCodecs encode and decode Fleet's kinds (and the apiserver's Status), made once for every
// registration attempt.
var fleetCodecs = sync.OnceValues(func() (runtime.NegotiatedSerializer, error) {
	s := runtime.NewScheme()
	if err := fleet.AddToScheme(s); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(s, fleet.SchemeGroupVersion)
	return serializer.NewCodecFactory(s).WithoutConversion(), nil
})

// registrationClient is a REST client for ClusterRegistrations at cfg.
func registrationClient(cfg *rest.Config) (*rest.RESTClient, error) {
	codecs, err := fleetCodecs()
	if err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.APIPath, c.GroupVersion, c.NegotiatedSerializer = "/apis", &fleet.SchemeGroupVersion, codecs
	return rest.RESTClientFor(c)
}

// spreadSleep waits spread(step), or until ctx ends (false).
func spreadSleep(ctx context.Context, step time.Duration) bool {
	return sleep(ctx, spread(step))
}

// await looks for the credential Secret name in the registration namespace, at once, then
// after o.PollInterval (default a second), each wait half again as long as the one before up to
// grantPollCap, for at most o.Timeout (default 30 minutes). The waits grow because in a
// registration storm every agent waiting for its credential asks: thousands asking each second
// kept the apiserver busy answering "not yet" (and refusing with 429) while the manager could
// grant only a few registrations a second (benchmarks/RESULTS.md, the 5,000-cluster storm). Each
// look is answered from the apiserver's cache (resourceVersion 0) rather than read through to
// etcd: a credential seen a moment late only costs another look.
func await(ctx context.Context, cfg *rest.Config, v registration.Values, name string, o Options, log *logrus.Entry) (*corev1.Secret, error) {
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	poll, timeout := o.PollInterval, o.Timeout
	if poll <= 0 {
		poll = grantPoll
	}
	if timeout <= 0 {
		timeout = grantTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// (Stepped by hand: wait.ExponentialBackoffWithContext gives up once the cap is reached.)
	backoff := wait.Backoff{Duration: poll, Factor: grantPollFactor, Jitter: 0.2, Steps: math.MaxInt32, Cap: max(poll, grantPollCap)}
	for {
		s, err := kc.CoreV1().Secrets(v.SystemRegistrationNamespace).Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
		switch {
		case err == nil:
			return s, nil
		case apierrors.IsUnauthorized(err):
			return nil, tokenError(v.APIServerURL, err)
		case !apierrors.IsNotFound(err):
			log.WithError(err).Debug("waiting for the credential")
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff.Step()):
		}
	}
}

// granted is the credential the manager wrote (d), reached where the token said unless the
// manager names its own address.
func granted(d map[string][]byte, v registration.Values) *Credential {
	c := &Credential{Token: string(d[registration.KeyToken]), APIServerURL: v.APIServerURL, APIServerCA: v.APIServerCA,
		ClusterNamespace: string(d[registration.KeyClusterNamespace]), ClusterName: string(d[registration.KeyClusterName]),
		ClusterObjectNamespace: string(d[registration.KeyClusterObjectNamespace]), SA: string(d[registration.KeyServiceAccount]),
		SANamespace: string(d[registration.KeyServiceAccountNamespace]), RegistrationKey: string(d[registration.KeyRegistrationKey])}
	if u := string(d[registration.KeyAPIServerURL]); u != "" {
		c.APIServerURL = u
		if ca := string(d[registration.KeyAPIServerCA]); ca != "" {
			c.APIServerCA = ca
		}
	}
	return c
}

func tokenError(url string, err error) error {
	if apierrors.IsUnauthorized(err) {
		return fmt.Errorf("the manager at %s refused the registration token (401 Unauthorized): it has expired or was deleted; create a new one (fleet install agent-token) and apply it", url)
	}
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("the manager at %s does not let this registration token register clusters (403 Forbidden): %w", url, err)
	}
	return fmt.Errorf("registering with the manager at %s: %w", url, err)
}

func readConfig(ctx context.Context, local kubernetes.Interface, ns string) (agentConfig, error) {
	var cfg agentConfig
	cm, err := local.CoreV1().ConfigMaps(ns).Get(ctx, registration.AgentConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return cfg, nil
	}
	if err != nil {
		return cfg, fmt.Errorf("reading configmap %s/%s: %w", ns, registration.AgentConfigMap, err)
	}
	if raw := cm.Data[registration.ConfigKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			return cfg, fmt.Errorf("configmap %s/%s, key %s: %w", ns, registration.AgentConfigMap, registration.ConfigKey, err)
		}
	}
	return cfg, nil
}

// Store writes the credential to the agent's Secret.
func Store(ctx context.Context, local kubernetes.Interface, ns string, c *Credential) error {
	data := map[string][]byte{
		registration.KeyToken: []byte(c.Token), registration.KeyAPIServerURL: []byte(c.APIServerURL),
		registration.KeyAPIServerCA: []byte(c.APIServerCA), registration.KeyClusterNamespace: []byte(c.ClusterNamespace),
		registration.KeyClusterName: []byte(c.ClusterName), registration.KeyClusterObjectNamespace: []byte(c.ClusterObjectNamespace),
		registration.KeyServiceAccount: []byte(c.SA), registration.KeyServiceAccountNamespace: []byte(c.SANamespace),
	}
	// The same as a kubeconfig, for people and tools.
	kc := clientcmdapi.NewConfig()
	kc.Clusters["manager"] = &clientcmdapi.Cluster{Server: c.APIServerURL, CertificateAuthorityData: []byte(c.APIServerCA)}
	kc.AuthInfos["agent"] = &clientcmdapi.AuthInfo{Token: c.Token}
	kc.Contexts["agent"] = &clientcmdapi.Context{Cluster: "manager", AuthInfo: "agent", Namespace: c.ClusterNamespace}
	kc.CurrentContext = "agent"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	data[registration.KeyKubeconfig] = raw
	if err := putSecret(ctx, local, ns, registration.AgentSecret, data); err != nil {
		return fmt.Errorf("storing the agent's credential in secret %s/%s: %w", ns, registration.AgentSecret, err)
	}
	return nil
}

// putSecret makes the data of the Secret ns/name data, creating the Secret if missing.
func putSecret(ctx context.Context, local kubernetes.Interface, ns, name string, data map[string][]byte) error {
	s, err := local.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = local.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Data: data}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	s.Data = data
	_, err = local.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
	return err
}

// Session is a live credential: the REST config of every upstream client reads its token from
// here, so a renewed token is used at once.
type Session struct {
	mu   sync.RWMutex
	cred Credential
	// TLSMode is how the session trusts the manager's certificate (TLSSystemStore or TLSStrict).
	TLSMode string
}

// NewSession starts a session with c.
func NewSession(c *Credential) *Session { return &Session{cred: *c} }

// Credential returns the current credential.
func (s *Session) Credential() Credential {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cred
}

// RESTConfig reaches the manager with the session's current token.
func (s *Session) RESTConfig() *rest.Config {
	c := s.Credential()
	return &rest.Config{Host: c.APIServerURL, TLSClientConfig: rest.TLSClientConfig{CAData: caData(c.APIServerCA, s.TLSMode)},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return &bearer{next: rt, s: s} }}
}

type bearer struct {
	next http.RoundTripper
	s    *Session
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.s.Credential().Token)
	return b.next.RoundTrip(req)
}

// Intervals and timeouts of registration and renewal.
const (
	// ExchangedLifetime is the lifetime asked for when the agent trades a credential Fleet
	// stored for one of its own ServiceAccount (the manager's default credential lifetime).
	ExchangedLifetime = 24 * time.Hour
	// RenewEvery is how often the agent renews its credential at most; a credential with a
	// shorter lifetime is renewed when a third of it has passed.
	RenewEvery = time.Hour
	// registerRetry is the first wait after a failed registration; each next one doubles, up
	// to registerRetryCap.
	registerRetry    = 2 * time.Second
	registerRetryCap = time.Minute
	// createRetry is the first step of the waits between tries of a registration request the
	// apiserver refused as one too many; createRetryTries bounds the tries (waits of up to 1, 2, 4
	// and 8 s between five tries) before Obtain's backoff takes over.
	createRetry      = time.Second
	createRetryTries = 5
	// requestTimeout bounds each request to the manager while registering.
	requestTimeout = 30 * time.Second
	// grantPoll is how soon a registering agent looks for its granted credential again (each
	// later wait grantPollFactor times the one before, up to grantPollCap), and grantTimeout how
	// long it waits for it (unless Options say otherwise).
	grantPoll       = time.Second
	grantPollFactor = 1.5
	grantPollCap    = 15 * time.Second
	grantTimeout    = 30 * time.Minute
	// exchangeRetry is how soon a refused exchange of Fleet's credential is tried again: the
	// manager allows it as soon as it has taken the Cluster over.
	exchangeRetry = 5 * time.Second
	// A failed renewal waits a quarter of the renewal period, within these bounds.
	renewRetryMin = time.Second
	renewRetryMax = time.Minute
	// assumedLifetime is how long a token whose claims cannot be read is taken to be valid.
	assumedLifetime = 24 * time.Hour
	// minLifetime is the shortest token the apiserver issues.
	minLifetime = 10 * time.Minute
)

// Renew keeps the session's credential fresh until ctx ends: it asks the manager for a new token
// of its own ServiceAccount (the one permission for that is its own) and stores it. every
// overrides the renewal period when positive.
func (s *Session) Renew(ctx context.Context, local kubernetes.Interface, ns string, every time.Duration) {
	cfg := s.RESTConfig()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		logrus.WithError(err).Error("credential renewal")
		return
	}
	// Renewals are recorded as Events on the agent's Secret, in its own cluster (the agent may
	// not write Events on the manager).
	events := record.NewBroadcaster(record.WithContext(ctx))
	defer events.Shutdown()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: local.CoreV1().Events(ns)})
	rec := events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "fleet-agent"})
	secret := &corev1.ObjectReference{APIVersion: "v1", Kind: "Secret", Namespace: ns, Name: registration.AgentSecret}
	for {
		c := s.Credential()
		next, lifetime, period, expires := schedule(c, every)
		if !sleep(ctx, next) {
			return
		}
		tr, err := s.renew(ctx, kube, c, lifetime)
		if err != nil {
			msg := "renewing the agent's credential failed; retrying"
			if c.toTrade() {
				msg = "trading " + c.traded() + " for an expiring one failed (the manager has not taken this cluster over yet?); retrying"
			} else if apierrors.IsUnauthorized(err) {
				msg = "the manager no longer accepts this agent's credential (its Cluster was deleted, or it expired while the manager was out of reach); register again with a new token"
			}
			logrus.WithError(err).WithField("expires", expires.Format(time.RFC3339)).Error(msg)
			if !sleep(ctx, retryAfter(c, period)) {
				return
			}
			continue
		}
		s.mu.Lock()
		updated := s.cred
		s.mu.Unlock()
		if err := Store(ctx, local, ns, &updated); err != nil {
			logrus.WithError(err).Warn("storing the renewed credential")
		}
		at := tr.Status.ExpirationTimestamp.Format(time.RFC3339)
		logrus.WithField("expires", at).Debug("agent credential renewed")
		reason, msg := "CredentialRenewed", "renewed the credential on the manager; it expires at "+at
		if c.toTrade() {
			reason, msg = "CredentialExchanged", "traded "+c.traded()+" for an expiring one; it expires at "+at
		}
		rec.Event(secret, corev1.EventTypeNormal, reason, msg)
	}
}

// schedule is when the credential is renewed next (from now), with what lifetime, the renewal
// period and when the credential expires. Fleet's credential (a token that never expires) is
// exchanged at once.
func schedule(c Credential, every time.Duration) (next, lifetime, period time.Duration, expires time.Time) {
	issued, expires := tokenTimes(c.Token)
	lifetime = expires.Sub(issued)
	period = every
	if period <= 0 {
		period = min(RenewEvery, lifetime/3)
		if period <= 0 {
			period = RenewEvery
		}
	}
	next = time.Until(issued.Add(period))
	if c.toTrade() {
		next, lifetime = 0, ExchangedLifetime
	}
	return max(next, 0), lifetime, period, expires
}

// renew asks the manager for a token of the agent's ServiceAccount (at least ten minutes long)
// and makes it the session's credential. A credential to trade asks for one of the ServiceAccount
// the manager gives its cluster.
func (s *Session) renew(ctx context.Context, kube kubernetes.Interface, c Credential, lifetime time.Duration) (*authenticationv1.TokenRequest, error) {
	secs := int64(max(lifetime, minLifetime) / time.Second)
	ns, sa := c.SANamespace, c.SA
	if c.toTrade() {
		ns, sa = registration.AgentIdentityNamespace, registration.AgentServiceAccount(c.ClusterNamespace)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.cred.Token, s.cred.SA, s.cred.SANamespace = tr.Status.Token, sa, ns
	s.mu.Unlock()
	return tr, nil
}

// sleep waits d, or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// retryAfter is how long a failed renewal waits: a quarter of the period, within
// renewRetryMin and renewRetryMax; an exchange of Fleet's credential, exchangeRetry.
func retryAfter(c Credential, period time.Duration) time.Duration {
	if c.toTrade() {
		return exchangeRetry
	}
	return min(renewRetryMax, max(period/4, renewRetryMin))
}

// tokenTimes reads when a ServiceAccount token was issued and expires (its JWT claims; the
// signature is the manager's business). Unreadable claims count as issued now, valid a day.
func tokenTimes(token string) (time.Time, time.Time) {
	now := time.Now()
	parts := strings.Split(token, ".")
	if len(parts) == 3 {
		if raw, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil {
			var claims struct {
				IssuedAt  int64 `json:"iat"`
				ExpiresAt int64 `json:"exp"`
			}
			if json.Unmarshal(raw, &claims) == nil && claims.IssuedAt > 0 && claims.ExpiresAt > claims.IssuedAt {
				return time.Unix(claims.IssuedAt, 0), time.Unix(claims.ExpiresAt, 0)
			}
		}
	}
	return now, now.Add(assumedLifetime)
}

// tokenSubject is the user a ServiceAccount token authenticates as (its JWT's "sub" claim, read
// without verifying the signature: the apiserver verifies the token, and the admission policy
// that what it says is true), or "" for a token that is not a ServiceAccount's JWT.
func tokenSubject(token string) string {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Sub string `json:"sub"`
	}
	if json.Unmarshal(payload, &claims) != nil || !strings.HasPrefix(claims.Sub, "system:serviceaccount:") {
		return ""
	}
	return claims.Sub
}
