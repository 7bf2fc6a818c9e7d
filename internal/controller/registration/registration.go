package registration

import (
	"context"
	"fmt"
	"time"

	"github.com/rancher/wrangler/v3/pkg/apply"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	rbaccontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/rbac/v1"
	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/registration"
	"github.com/fleetgo/fleet/internal/summary"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Deps are what the registration controllers read and write.
type Deps struct {
	Kube kubernetes.Interface
	// Apply writes the identities, roles and Secrets as apply sets; it must cache
	// ServiceAccounts, Secrets, Roles, RoleBindings, ClusterRoles and ClusterRoleBindings.
	Apply                apply.Apply
	Tokens               fleetcontrollers.ClusterRegistrationTokenController
	ClusterRegistrations fleetcontrollers.ClusterRegistrationController
	Clusters             fleetcontrollers.ClusterController
	// ClusterGroups are read for the groups a registration token allows (registration.RegisteredLabels).
	ClusterGroups fleetcontrollers.ClusterGroupCache
	// Secrets is the Secret cache (it must hold the registration namespace's).
	Secrets corecontrollers.SecretCache
	// RoleBindings is the RoleBinding cache (the one Apply reads).
	RoleBindings rbaccontrollers.RoleBindingCache
	// RegistrationNamespace holds the credential Secrets (cattle-fleet-clusters-system).
	RegistrationNamespace string
	// CredentialLifetime is how long an agent credential is valid (at least 10 minutes).
	CredentialLifetime time.Duration
	// Recorder, when set, records a Registered Event on each Cluster an agent registers as.
	Recorder record.EventRecorder
	// Config is the configuration in force (the URL and CA agents are given, whether their
	// labels count).
	Config *config.Store
}

// DefaultCredentialLifetime is how long an agent's credential lives. The agent renews it every
// hour (or third of the lifetime, if shorter), so it may be cut off from the manager for most of
// a day and still renew it when it is back.
const DefaultCredentialLifetime = 24 * time.Hour

// CheckCredentialLifetime refuses an agent credential lifetime the apiserver would not honour:
// it issues no token shorter than ten minutes, and silently lengthening (or replacing) what an
// administrator asked for would hide the mistake.
func CheckCredentialLifetime(d time.Duration) error {
	if d < minTokenLifetime {
		return fmt.Errorf("--agent-credential-lifetime %s: must be at least %s (the shortest token the apiserver issues)", d, minTokenLifetime)
	}
	return nil
}

// byClientID indexes Clusters, and regByClientID ClusterRegistrations, by
// "namespace/spec.clientID".
const (
	byClientID    = "fleet.cattle.io/by-client-id"
	regByClientID = "fleet.cattle.io/registration-by-client-id"
)

// Registration's intervals.
const (
	// credentialSecretTTL is how long a credential Secret stays in the registration namespace
	// for its agent to pick up, unless the agent is seen to have picked it up sooner.
	credentialSecretTTL = 40 * time.Minute
	// namespacePendingRetry is how soon a registration whose Cluster has no namespace yet looks
	// again.
	namespacePendingRetry = 500 * time.Millisecond
)

// Register starts the token and registration controllers and makes sure of the shared roles.
func Register(ctx context.Context, d Deps) error {
	if d.CredentialLifetime == 0 {
		d.CredentialLifetime = DefaultCredentialLifetime
	}
	if err := CheckCredentialLifetime(d.CredentialLifetime); err != nil {
		return err
	}
	if err := sharedRoles(ctx, d.Kube, d.Apply, d.RegistrationNamespace); err != nil {
		return err
	}
	t := &tokens{ctx: ctx, kube: d.Kube, apply: d.Apply, config: d.Config, tokens: d.Tokens, regNS: d.RegistrationNamespace, now: time.Now}
	d.Tokens.OnChange(ctx, "clusterregistrationtoken", t.onChange)
	fleetcontrollers.RegisterClusterRegistrationTokenStatusHandler(ctx, d.Tokens, "", "clusterregistrationtoken-issue", t.issue)
	d.Clusters.Cache().AddIndexer(byClientID, func(c *fleet.Cluster) ([]string, error) {
		if c.Spec.ClientID == "" {
			return nil, nil
		}
		return []string{clientIDKey(c.Namespace, c.Spec.ClientID)}, nil
	})
	d.ClusterRegistrations.Cache().AddIndexer(regByClientID, func(reg *fleet.ClusterRegistration) ([]string, error) {
		if reg.Spec.ClientID == "" {
			return nil, nil
		}
		return []string{clientIDKey(reg.Namespace, reg.Spec.ClientID)}, nil
	})
	r := &registrations{Deps: d, ctx: ctx}
	d.ClusterRegistrations.OnChange(ctx, "clusterregistration-cleanup", r.onChange)
	d.Clusters.OnChange(ctx, "clusterregistration-pickup", r.onCheckIn)
	fleetcontrollers.RegisterClusterRegistrationStatusHandler(ctx, d.ClusterRegistrations, "", "clusterregistration", r.grantRegistration)
	a := &adopter{ctx: ctx, kube: d.Kube, apply: d.Apply, roleBindings: d.RoleBindings, clusters: d.Clusters}
	d.Clusters.OnChange(ctx, "cluster-identity", a.onChange)
	return nil
}

// Apply sets of registration: the roles every agent and import token shares, and each
// registration's credential Secret.
const (
	sharedRolesSet = "fleet-registration-shared-roles"
	credentialSet  = "fleet-agent-credential"
)

// sharedRoles makes the registration namespace and the agent identity namespace, and applies the
// roles that every import token (reading its agent's credential there) and agent (reading its
// BundleDeployments, bound in its cluster namespace; reading Contents, one binding for all of
// them) is bound to.
func sharedRoles(ctx context.Context, kube kubernetes.Interface, a apply.Apply, regNS string) error {
	for _, ns := range []string{regNS, registration.AgentIdentityNamespace} {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	err := a.WithSetID(sharedRolesSet).ApplyObjects(
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: registration.CredentialReaderRole, Namespace: regNS}, Rules: registration.CredentialReaderRules()},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: registration.ContentReaderRole}, Rules: registration.ContentReaderRules()},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: registration.AgentRole}, Rules: registration.AgentRules()},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: registration.ClusterStatusRole}, Rules: registration.ClusterStatusRules()},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: registration.ContentReaderBinding},
			RoleRef: roleRef("ClusterRole", registration.ContentReaderRole), Subjects: []rbacv1.Subject{registration.AgentIdentities()}},
	)
	if err != nil {
		return fmt.Errorf("writing the registration roles: %w", err)
	}
	return nil
}

type registrations struct {
	Deps
	ctx context.Context
}

func (r *registrations) log(reg *fleet.ClusterRegistration) *logrus.Entry {
	return logrus.WithFields(logfields.For("clusterregistration", reg.Namespace, reg.Name))
}

// onChange deletes a registration's credential Secret once picked up (or the registration is
// gone): at once when the Cluster's agent has checked in since the Secret was written (only an
// agent holding a credential can), otherwise when the Secret's time is up.
func (r *registrations) onChange(key string, reg *fleet.ClusterRegistration) (*fleet.ClusterRegistration, error) {
	if reg == nil {
		// Its credential Secret, if still there, goes with it.
		return nil, r.Apply.WithSetID(credentialSet).WithOwnerKey(key, fleet.SchemeGroupVersion.WithKind("ClusterRegistration")).ApplyObjects()
	}
	if reg.DeletionTimestamp != nil || !reg.Status.Granted {
		return reg, nil
	}
	if cluster, err := r.Clusters.Cache().Get(reg.Namespace, reg.Status.ClusterName); err == nil && r.pickedUp(reg, cluster) {
		r.log(reg).Debug("the agent checked in with its credential: deleting the credential Secret")
		return reg, r.Apply.WithSetID(credentialSet).WithOwner(reg).ApplyObjects()
	}
	// The credential Secret is for picking up, not for keeping.
	if age := time.Since(reg.CreationTimestamp.Time); age < credentialSecretTTL {
		r.ClusterRegistrations.EnqueueAfter(reg.Namespace, reg.Name, credentialSecretTTL-age)
		return reg, nil
	}
	return reg, r.Apply.WithSetID(credentialSet).WithOwner(reg).ApplyObjects()
}

// clientIDKey is the key of both clientID indexes.
func clientIDKey(namespace, clientID string) string { return namespace + "/" + clientID }

// pickedUp is whether the granted registration's credential Secret is still there and the agent
// of cluster (the registration's) has checked in since it was written. The check-in's time is
// the agent's clock: one running behind leaves the Secret to its time-out, which is safe.
func (r *registrations) pickedUp(reg *fleet.ClusterRegistration, cluster *fleet.Cluster) bool {
	secret, err := r.Secrets.Get(r.RegistrationNamespace, registration.CredentialSecret(reg.Spec.ClientID, reg.Spec.ClientRandom))
	if err != nil || secret.DeletionTimestamp != nil {
		return false
	}
	seen := cluster.Status.Agent.LastSeen
	// Both times are in whole seconds: a check-in in the second the Secret was written may be
	// the previous credential's (an agent registering again right after its last check-in), and
	// deleting the new credential then would leave the agent waiting for it. Only a later
	// second counts.
	return !seen.IsZero() && seen.Time.After(secret.CreationTimestamp.Time)
}

// onCheckIn looks at the Cluster's granted registrations whose credential Secret is still there
// when its agent checks in, so that the Secret goes as soon as the agent has it, and at those
// still held (held). After that a check-in costs an index lookup and a cache read per
// registration of the cluster.
func (r *registrations) onCheckIn(_ string, c *fleet.Cluster) (*fleet.Cluster, error) {
	if c == nil || c.Spec.ClientID == "" || c.Status.Agent.LastSeen.IsZero() {
		return c, nil
	}
	regs, err := r.ClusterRegistrations.Cache().GetByIndex(regByClientID, clientIDKey(c.Namespace, c.Spec.ClientID))
	if err != nil {
		return c, nil
	}
	for _, reg := range regs {
		// A held registration looks again when the Cluster changes (an allowance, a check-in).
		if !reg.Status.Granted || reg.Status.ClusterName == c.Name && r.pickedUp(reg, c) {
			r.ClusterRegistrations.Enqueue(reg.Namespace, reg.Name)
		}
	}
	return c, nil
}

// grantRegistration grants a registration the Cluster, its agent identity and a credential, and
// returns the status saying so (the generated status handler writes it).
func (r *registrations) grantRegistration(reg *fleet.ClusterRegistration, status fleet.ClusterRegistrationStatus) (fleet.ClusterRegistrationStatus, error) {
	if reg.DeletionTimestamp != nil || status.Granted {
		return status, nil
	}
	if reg.Spec.ClientID == "" || reg.Spec.ClientRandom == "" {
		r.log(reg).Warn("registration without clientID or clientRandom: ignored")
		return status, nil
	}
	cluster, err := r.cluster(reg)
	if err != nil {
		return status, err
	}
	proven, why := keyProof(reg, cluster)
	if why != "" {
		r.log(reg).WithField("cluster", cluster.Name).Warn("registration refused: " + why)
		if r.Recorder != nil {
			r.Recorder.Eventf(cluster, corev1.EventTypeWarning, "RegistrationRefused", "registration %s/%s asks for this cluster: %s", reg.Namespace, reg.Name, why)
		}
		return status, nil // looked at again when the Cluster changes (an allowance)
	}
	if wait, held := r.held(cluster, time.Now()); held && !proven {
		r.log(reg).WithField("cluster", cluster.Name).Warn("registration held: the cluster's agent still checks in")
		if r.Recorder != nil {
			r.Recorder.Eventf(cluster, corev1.EventTypeWarning, "RegistrationHeld",
				"registration %s/%s asks for this cluster while its agent checks in; it is granted once the cluster is Offline, "+
					"or at once if the Cluster is annotated %s=true", reg.Namespace, reg.Name, registration.AllowReregistrationAnnotation)
		}
		r.ClusterRegistrations.EnqueueAfter(reg.Namespace, reg.Name, wait)
		return status, nil
	}
	if cluster.Status.Namespace != target.ClusterNamespace(cluster) {
		// The cluster controller has not given it its namespace yet.
		r.ClusterRegistrations.EnqueueAfter(reg.Namespace, reg.Name, namespacePendingRetry)
		return status, nil
	}
	key, hash, err := registration.NewKey()
	if err != nil {
		return status, err
	}
	if err := r.credential(reg, cluster, key); err != nil {
		return status, err
	}
	if err := r.keyed(cluster, hash); err != nil {
		return status, err
	}
	r.forgetOlder(reg)
	r.log(reg).WithField("cluster", cluster.Name).Info("cluster registered")
	if r.Recorder != nil {
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "Registered", "an agent registered as this cluster (%s/%s); its credential is in namespace %s",
			reg.Namespace, reg.Name, cluster.Status.Namespace)
	}
	status.Granted, status.ClusterName = true, cluster.Name
	return status, nil
}

// held reports whether a registration for the Cluster must wait, and how long at most: its agent
// has checked in and is not Offline, and no administrator allowed a new registration. Anyone
// with a registration token of the namespace can ask for any clientID, and every Cluster shows
// its own, so a registration is no proof of being the cluster's agent: a live Cluster keeps its
// agent. For a Cluster holding no registration key (keyProof decides for the others), a
// reinstalled agent gets its Cluster back once the old agent's silence makes the Cluster
// Offline (three check-in intervals), or at once with AllowReregistrationAnnotation.
func (r *registrations) held(c *fleet.Cluster, now time.Time) (time.Duration, bool) {
	seen := c.Status.Agent.LastSeen
	if seen.IsZero() || c.Annotations[registration.AllowReregistrationAnnotation] == "true" {
		return 0, false
	}
	interval := r.Config.Get().WithDefaults().AgentCheckinInterval.Duration
	if summary.Offline(c, interval, now) {
		return 0, false
	}
	return seen.Add(summary.OfflineAfter*interval).Sub(now) + time.Second, true
}

// keyProof says whether reg may have cluster as far as its registration key goes: proven when
// it carries the key whose hash the Cluster holds (granted at once, even while an agent checks
// in), else why it is refused ("" when the Cluster holds no key, as one never registered by this
// manager, or an administrator allowed the next registration).
func keyProof(reg *fleet.ClusterRegistration, cluster *fleet.Cluster) (proven bool, why string) {
	hash := cluster.Annotations[registration.KeyHashAnnotation]
	if hash == "" {
		return false, ""
	}
	if registration.KeyMatches(reg.Annotations[registration.KeyAnnotation], hash) {
		return true, ""
	}
	if cluster.Annotations[registration.AllowReregistrationAnnotation] == "true" {
		return false, ""
	}
	what := "carries no registration key"
	if reg.Annotations[registration.KeyAnnotation] != "" {
		what = "carries another registration key than the one"
	}
	return false, fmt.Sprintf("it %s (annotation %s) the manager gave this cluster's agent; a registration token and the clientID are not enough. "+
		"An agent that lost its key is let in once an administrator annotates the Cluster %s=true", what, registration.KeyAnnotation, registration.AllowReregistrationAnnotation)
}

// keyed records the hash of the registration key just given to cluster's agent, and removes
// the one-time AllowReregistrationAnnotation if a registration used it.
func (r *registrations) keyed(c *fleet.Cluster, hash string) error {
	_, allowed := c.Annotations[registration.AllowReregistrationAnnotation]
	if _, err := r.Clusters.Patch(c.Namespace, c.Name, types.MergePatchType, registration.KeyPatch(hash, allowed)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("recording the registration key of cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// credential grants the Cluster's agent its identity and applies the Secret its agent picks the
// credential (and its new registration key) up from.
func (r *registrations) credential(reg *fleet.ClusterRegistration, cluster *fleet.Cluster, key string) error {
	token, err := r.grant(r.ctx, cluster)
	if err != nil {
		return err
	}
	cfg := r.Config.Get()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registration.CredentialSecret(reg.Spec.ClientID, reg.Spec.ClientRandom),
		Namespace: r.RegistrationNamespace,
		Labels:    map[string]string{fleet.ClusterLabel: cluster.Name, fleet.ClusterNamespaceLabel: cluster.Namespace}},
		Type: registration.CredentialSecretType,
		Data: map[string][]byte{
			registration.KeyToken: []byte(token), registration.KeyAPIServerURL: []byte(cfg.APIServerURL),
			registration.KeyAPIServerCA: []byte(cfg.APIServerCA), registration.KeyClusterNamespace: []byte(cluster.Status.Namespace),
			registration.KeyClusterName: []byte(cluster.Name), registration.KeyClusterObjectNamespace: []byte(cluster.Namespace),
			registration.KeyServiceAccount:          []byte(registration.AgentServiceAccount(cluster.Status.Namespace)),
			registration.KeyServiceAccountNamespace: []byte(registration.AgentIdentityNamespace),
			registration.KeyRegistrationKey:         []byte(key),
		}}
	if err := r.Apply.WithSetID(credentialSet).WithOwner(reg).ApplyObjects(secret); err != nil {
		return fmt.Errorf("writing the credential of registration %s/%s: %w", reg.Namespace, reg.Name, err)
	}
	return nil
}

// forgetOlder deletes the older registrations of the same agent: they are done with.
func (r *registrations) forgetOlder(reg *fleet.ClusterRegistration) {
	// By index: a storm of N registrations would otherwise read N registrations per grant.
	same, err := r.ClusterRegistrations.Cache().GetByIndex(regByClientID, clientIDKey(reg.Namespace, reg.Spec.ClientID))
	if err != nil {
		return
	}
	for _, old := range same {
		if old.Name != reg.Name && old.CreationTimestamp.Before(&reg.CreationTimestamp) {
			_ = r.ClusterRegistrations.Delete(old.Namespace, old.Name, &metav1.DeleteOptions{})
		}
	}
}

// cluster finds the Cluster of the registration's clientID, or creates it with the agent's
// labels (which apply only here: afterwards a Cluster's labels change on the manager only).
func (r *registrations) cluster(reg *fleet.ClusterRegistration) (*fleet.Cluster, error) {
	name := registration.ClusterName(reg.Spec.ClientID)
	if c, err := r.Clusters.Cache().Get(reg.Namespace, name); err == nil {
		return c, nil
	}
	// A Cluster made ahead of time (by an admin, or to be imported) with spec.clientID.
	if found, err := r.Clusters.Cache().GetByIndex(byClientID, clientIDKey(reg.Namespace, reg.Spec.ClientID)); err == nil && len(found) > 0 {
		return found[0], nil
	}
	tokens, err := r.Tokens.Cache().List(reg.Namespace, labels.Everything())
	if err != nil {
		return nil, err
	}
	var groups []*fleet.ClusterGroup
	if r.ClusterGroups != nil {
		if groups, err = r.ClusterGroups.List(reg.Namespace, labels.Everything()); err != nil {
			return nil, err
		}
	}
	clusterLabels, dropped := registration.RegisteredLabels(reg, tokens, groups)
	if dropped != "" {
		r.log(reg).Warn(dropped)
	}
	if r.Config.Get().IgnoreClusterRegistrationLabels {
		clusterLabels = nil
	}
	c, err := r.Clusters.Create(&fleet.Cluster{
		// With the cluster controller's finalizer from the start: one write fewer per
		// registration in a storm.
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: reg.Namespace, Labels: clusterLabels, Finalizers: []string{fleet.ClusterFinalizer},
			Annotations: map[string]string{registration.ClientIDAnnotation: reg.Spec.ClientID,
				registration.IdentityAnnotation: registration.AgentIdentity(names.ClusterNamespace(reg.Namespace, name))}},
		Spec: fleet.ClusterSpec{ClientID: reg.Spec.ClientID},
	})
	if apierrors.IsAlreadyExists(err) {
		return r.Clusters.Get(reg.Namespace, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating cluster %s/%s for registration %s: %w", reg.Namespace, name, reg.Name, err)
	}
	return c, nil
}

// grant gives the Cluster's agent its identity and permissions and returns a fresh credential.
func (r *registrations) grant(ctx context.Context, c *fleet.Cluster) (string, error) {
	ns := target.ClusterNamespace(c)
	sa := registration.AgentServiceAccount(ns)
	if err := identity(ctx, r.Kube, r.Apply, r.RoleBindings, c); err != nil {
		return "", err
	}
	// A Cluster made ahead of time (the local cluster, an import, an admin's) is annotated now:
	// the admission policy lets an agent check in only on the Cluster that names it.
	if _, err := nameIdentity(r.Clusters, c, ns); err != nil {
		return "", err
	}
	secs := int64(r.CredentialLifetime / time.Second)
	tr, err := r.Kube.CoreV1().ServiceAccounts(registration.AgentIdentityNamespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("issuing the credential of cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	return tr.Status.Token, nil
}
