package register

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func fleetKubeconfig(t *testing.T, token string) []byte {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: "https://manager:6443", CertificateAuthorityData: []byte("CA")}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user", Namespace: "cluster-fleet-default-c-1-abc"}
	kc.CurrentContext = "default"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func agentSecret(data map[string][]byte) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registration.AgentSecret, Namespace: "cattle-fleet-system"}, Data: data}
}

// The Secret a Fleet agent stored: a kubeconfig and where its cluster lives on the manager.
func TestStoredReadsFleetsSecret(t *testing.T) {
	kube := fake.NewSimpleClientset(agentSecret(map[string][]byte{
		"kubeconfig": fleetKubeconfig(t, "legacy"), "deploymentNamespace": []byte("cluster-fleet-default-c-1-abc"),
		"clusterNamespace": []byte("fleet-default"), "clusterName": []byte("c-1")}))
	c, err := Stored(context.Background(), kube, "cattle-fleet-system")
	if err != nil {
		t.Fatal(err)
	}
	want := Credential{Token: "legacy", APIServerURL: "https://manager:6443", APIServerCA: "CA",
		ClusterNamespace: "cluster-fleet-default-c-1-abc", ClusterName: "c-1", ClusterObjectNamespace: "fleet-default"}
	if *c != want {
		t.Errorf("Stored = %+v, want %+v", *c, want)
	}
	if d := retryAfter(*c, RenewEvery); d > 10e9 {
		t.Errorf("a Fleet credential's exchange is retried after %s, want seconds", d)
	}
}

func TestStoredRejectsABrokenFleetSecret(t *testing.T) {
	for name, data := range map[string]map[string][]byte{
		"kubeconfig is not one": {"kubeconfig": []byte("{{"), "deploymentNamespace": []byte("ns"), "clusterName": []byte("c")},
		"no cluster name":       {"kubeconfig": fleetKubeconfig(t, "legacy"), "deploymentNamespace": []byte("ns")},
		"no token":              {"kubeconfig": fleetKubeconfig(t, ""), "deploymentNamespace": []byte("ns"), "clusterName": []byte("c")},
	} {
		_, err := Stored(context.Background(), fake.NewSimpleClientset(agentSecret(data)), "cattle-fleet-system")
		if err == nil || !strings.Contains(err.Error(), "written by Fleet") {
			t.Errorf("%s: err = %v, want one naming Fleet's secret", name, err)
		}
	}
}

// Once traded, the credential is stored in this project's keys, and read back the same.
func TestStoreThenStored(t *testing.T) {
	kube := fake.NewSimpleClientset()
	in := &Credential{Token: "t", APIServerURL: "https://m", APIServerCA: "CA", ClusterNamespace: "cns", ClusterName: "c",
		ClusterObjectNamespace: "fleet-default", SA: registration.AgentServiceAccount("cns"), SANamespace: registration.AgentIdentityNamespace}
	if err := Store(context.Background(), kube, "cattle-fleet-system", in); err != nil {
		t.Fatal(err)
	}
	out, err := Stored(context.Background(), kube, "cattle-fleet-system")
	if err != nil {
		t.Fatal(err)
	}
	if *out != *in {
		t.Errorf("Stored = %+v, want %+v", *out, *in)
	}
}

// A credential this manager issued before agent identities moved to their own namespace names
// its ServiceAccount but not the namespace: it is traded at once, as Fleet's is; a current one is
// renewed on schedule.
func TestEarlierIdentityIsTraded(t *testing.T) {
	kube := fake.NewSimpleClientset(agentSecret(map[string][]byte{"token": []byte("t"), "apiServerURL": []byte("https://m"),
		"clusterNamespace": []byte("cns"), "clusterName": []byte("c"), "serviceAccount": []byte("fleet-agent")}))
	c, err := Stored(context.Background(), kube, "cattle-fleet-system")
	if err != nil {
		t.Fatal(err)
	}
	if !c.toTrade() || !strings.Contains(c.traded(), "earlier agent identity (cns/fleet-agent)") {
		t.Errorf("toTrade = %v, traded = %q: want the earlier identity traded", c.toTrade(), c.traded())
	}
	if next, lifetime, _, _ := schedule(*c, 0); next != 0 || lifetime != ExchangedLifetime {
		t.Errorf("schedule = %s, %s: want at once, for %s", next, lifetime, ExchangedLifetime)
	}
	c.SA, c.SANamespace = registration.AgentServiceAccount("cns"), registration.AgentIdentityNamespace
	if next, _, _, _ := schedule(*c, 0); c.toTrade() || next == 0 {
		t.Errorf("a current credential: toTrade = %v, next = %s; want renewed on schedule", c.toTrade(), next)
	}
}

func TestBootstrapValuesAndIdentity(t *testing.T) {
	ctx := context.Background()
	boot := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registration.BootstrapSecret, Namespace: "cattle-fleet-system"},
		Data: map[string][]byte{"token": []byte("t"), "apiServerURL": []byte("https://m"), "labels": []byte(`{"group":"edge","env":"token"}`)}}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: registration.AgentConfigMap, Namespace: "cattle-fleet-system"},
		Data: map[string]string{"config": `{"labels":{"env":"config","tier":"a"},"clientID":"from-config"}`}}
	kube := fake.NewSimpleClientset(boot, cm)
	v, group, err := bootstrapValues(ctx, kube, "cattle-fleet-system")
	if err != nil {
		t.Fatal(err)
	}
	if v.ClusterNamespace != "fleet-default" || v.SystemRegistrationNamespace != "cattle-fleet-clusters-system" {
		t.Errorf("defaults: %+v", v)
	}
	id, labels, err := identity(ctx, kube, Options{Namespace: "cattle-fleet-system", Labels: map[string]string{"tier": "b"}}, group.Data[registration.KeyLabels])
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"env": "token", "tier": "b", "group": "edge"}
	if id != "from-config" || len(labels) != len(want) || labels["env"] != "token" || labels["tier"] != "b" || labels["group"] != "edge" {
		t.Errorf("identity = %q %v, want from-config %v (the token's labels win, then the option's)", id, labels, want)
	}

	delete(boot.Data, "apiServerURL")
	_, _, err = bootstrapValues(ctx, fake.NewSimpleClientset(boot), "cattle-fleet-system")
	if err == nil || !strings.Contains(err.Error(), "key apiServerURL is empty") {
		t.Errorf("without apiServerURL: %v", err)
	}
	if _, _, err := bootstrapValues(ctx, fake.NewSimpleClientset(), "cattle-fleet-system"); err != ErrNoBootstrap {
		t.Errorf("without the Secret: %v, want ErrNoBootstrap", err)
	}
}

func TestGrantedPrefersTheManagersAddress(t *testing.T) {
	v := registration.Values{APIServerURL: "https://from-token", APIServerCA: "token-ca"}
	c := granted(map[string][]byte{"token": []byte("t"), "clusterNamespace": []byte("cns"), "clusterName": []byte("c")}, v)
	if c.APIServerURL != "https://from-token" || c.APIServerCA != "token-ca" || c.ClusterNamespace != "cns" {
		t.Errorf("granted without the manager's address = %+v", c)
	}
	c = granted(map[string][]byte{"apiServerURL": []byte("https://manager"), "apiServerCA": []byte("manager-ca")}, v)
	if c.APIServerURL != "https://manager" || c.APIServerCA != "manager-ca" {
		t.Errorf("granted with the manager's address = %+v", c)
	}
}

// Agents refused together must not come back together: their waits cover the step evenly.
func TestSpreadCoversTheStep(t *testing.T) {
	const step = time.Minute
	var sum time.Duration
	var halves [2]int
	for range 2000 {
		d := spread(step)
		if d < step/10 || d >= step {
			t.Fatalf("spread(%s) = %s, want within [%s, %s)", step, d, step/10, step)
		}
		sum += d
		halves[d*2/step]++
	}
	// Uniform over [6 s, 60 s): a mean of 33 s, 44% of the waits in the first half.
	if mean := sum / 2000; mean < 30*time.Second || mean > 36*time.Second {
		t.Errorf("mean wait %s, want about 33s", mean)
	}
	if halves[0] < 700 || halves[1] < 900 {
		t.Errorf("waits per half of the step: %v, want both halves used (about 890 and 1110)", halves)
	}
	if d := spread(0); d != 0 {
		t.Errorf("spread(0) = %s", d)
	}
}

// registrationServer answers ClusterRegistration creates: the first refused ones with 429 (and
// the apiserver's Retry-After of one second), the rest with the created object. It counts the
// creates it saw.
func registrationServer(t *testing.T, refused int) (*httptest.Server, *atomic.Int32) {
	var creates atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/apis/fleet.cattle.io/v1alpha1/namespaces/fleet-default/clusterregistrations" {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if int(creates.Add(1)) <= refused {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Too many requests, please try again later.","reason":"TooManyRequests","code":429}`))
			return
		}
		var reg fleet.ClusterRegistration
		if err := json.NewDecoder(r.Body).Decode(&reg); err != nil {
			t.Errorf("decoding the registration: %v", err)
		}
		if reg.Name == "" {
			t.Errorf("a registration request without a name: a try sent again would make a second one")
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&reg)
	}))
	t.Cleanup(srv.Close)
	return srv, &creates
}

// A registration request refused as one too many is sent again after the agent's own growing,
// spread waits, and client-go does not send it again on its own (it would, ten times, a second
// apart, for every agent refused at the same moment).
func TestRefusedRegistrationRequestsWaitTheirTurn(t *testing.T) {
	srv, creates := registrationServer(t, 2)
	var steps []time.Duration
	sleep := func(_ context.Context, step time.Duration) bool { steps = append(steps, step); return true }
	v := registration.Values{APIServerURL: srv.URL, ClusterNamespace: "fleet-default"}
	name, err := request(context.Background(), &rest.Config{Host: srv.URL}, v, "client-1", "nonce-1", map[string]string{"env": "dev"}, sleep)
	if err != nil {
		t.Fatal(err)
	}
	if want := registration.RequestName("client-1", "nonce-1"); name != want {
		t.Errorf("got registration %q, want %q", name, want)
	}
	if n := creates.Load(); n != 3 {
		t.Errorf("the apiserver saw %d creates, want 3 (two refused, one accepted)", n)
	}
	if want := []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(steps, want) {
		t.Errorf("waited steps %v, want %v", steps, want)
	}
}

// Refused every time, the request gives up after createRetryTries tries, with the apiserver's
// error, for Obtain's longer backoff.
func TestRegistrationRequestRefusedEveryTimeGivesUp(t *testing.T) {
	srv, creates := registrationServer(t, 1000)
	sleeps := 0
	sleep := func(context.Context, time.Duration) bool { sleeps++; return true }
	v := registration.Values{APIServerURL: srv.URL, ClusterNamespace: "fleet-default"}
	_, err := request(context.Background(), &rest.Config{Host: srv.URL}, v, "client-1", "nonce-1", nil, sleep)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("got %v, want the apiserver's 429", err)
	}
	if n := creates.Load(); n != createRetryTries || sleeps != createRetryTries-1 {
		t.Errorf("%d creates and %d waits, want %d and %d", n, sleeps, createRetryTries, createRetryTries-1)
	}
}

// nonceAsRead is pendingNonce of the bootstrap Secret in ns as a try reads it.
func nonceAsRead(ctx context.Context, local *fake.Clientset, ns string) (string, error) {
	boot, err := local.CoreV1().Secrets(ns).Get(ctx, registration.BootstrapSecret, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	return pendingNonce(ctx, local, boot)
}

// The nonce of a registration asked for and not yet granted outlives the try (and the agent's
// restart: it is kept in the bootstrap Secret), so the request sent again is the same
// ClusterRegistration; once given up on, the next try draws a new one.
func TestPendingRegistrationKeepsItsNonce(t *testing.T) {
	ctx := context.Background()
	local := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registration.BootstrapSecret, Namespace: "agent"},
		Data: map[string][]byte{registration.KeyToken: []byte("t")}})
	first, err := nonceAsRead(ctx, local, "agent")
	if err != nil || len(first) != 64 {
		t.Fatalf("nonce %q, %v: want 64 hex digits", first, err)
	}
	again, err := nonceAsRead(ctx, local, "agent")
	if err != nil || again != first {
		t.Errorf("asked again: nonce %q, %v, want the first, %q", again, err, first)
	}
	if registration.RequestName("id", first) != registration.RequestName("id", again) || registration.RequestName("id", first) == registration.RequestName("id2", first) {
		t.Errorf("the request's name must follow the clientID and the nonce")
	}
	forgetNonce(ctx, local, "agent")
	fresh, err := nonceAsRead(ctx, local, "agent")
	if err != nil || fresh == first {
		t.Errorf("after giving up: nonce %q, %v, want a new one", fresh, err)
	}
	s, _ := local.CoreV1().Secrets("agent").Get(ctx, registration.BootstrapSecret, metav1.GetOptions{})
	if string(s.Data[registration.KeyToken]) != "t" {
		t.Errorf("the token was lost: %v", s.Data)
	}
}

// A bootstrap Secret the agent cannot write (immutable, or not its to update) does not stop the
// registration: the nonce is then of that try only, as before it was kept.
func TestPendingNonceOfAnUnwritableBootstrapSecret(t *testing.T) {
	ctx := context.Background()
	local := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registration.BootstrapSecret, Namespace: "agent"},
		Data: map[string][]byte{registration.KeyToken: []byte("t")}})
	local.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, registration.BootstrapSecret, field.ErrorList{field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set")})
	})
	nonce, err := nonceAsRead(ctx, local, "agent")
	if err != nil || len(nonce) != 64 {
		t.Errorf("nonce %q, %v: want a nonce of this try", nonce, err)
	}
	local.PrependReactor("update", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is down")
	})
	if _, err := nonceAsRead(ctx, local, "agent"); err == nil {
		t.Errorf("an update that failed for another reason must fail the try (it is retried)")
	}
}

// A kept nonce is used again only when it is one the agent could have drawn (64 hex digits): a
// short or foreign value written into the bootstrap Secret is replaced by a fresh one.
func TestPendingNonceNotOneTheAgentDrew(t *testing.T) {
	ctx := context.Background()
	for _, kept := range []string{"a", strings.Repeat("z", 64), strings.Repeat("0", 63)} {
		local := fake.NewSimpleClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: registration.BootstrapSecret, Namespace: "agent"},
			Data: map[string][]byte{registration.KeyToken: []byte("t"), registration.KeyClientRandom: []byte(kept)}})
		nonce, err := nonceAsRead(ctx, local, "agent")
		if err != nil || nonce == kept || len(nonce) != 64 {
			t.Errorf("kept %q: nonce %q, %v, want a fresh one", kept, nonce, err)
		}
		s, _ := local.CoreV1().Secrets("agent").Get(ctx, registration.BootstrapSecret, metav1.GetOptions{})
		if string(s.Data[registration.KeyClientRandom]) != nonce {
			t.Errorf("kept %q: the fresh nonce is not kept (%q)", kept, s.Data[registration.KeyClientRandom])
		}
	}
}
