package clusterimport

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestSecretNamespaceAllowed(t *testing.T) {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "edge"}, Spec: fleet.ClusterSpec{KubeConfigSecret: "kc"}}
	for _, tc := range []struct {
		secretNS string
		allowed  []string
		err      string
	}{
		{secretNS: "team-a"},
		{secretNS: "fleet-local", err: `spec.kubeConfigSecretNamespace "fleet-local" (kubeConfigSecret fleet-local/kc): a Cluster may only use a kubeconfig Secret of its own namespace "team-a"`},
		{secretNS: "kube-system", allowed: []string{"kubeconfigs"}, err: "kubeConfigSecretNamespaces"},
		{secretNS: "kubeconfigs", allowed: []string{"kubeconfigs"}},
		// The system namespace, for the manager's own credential only (TestSecretIsFor).
		{secretNS: "cattle-fleet-system"},
	} {
		err := secretNamespaceAllowed(c, tc.secretNS, tc.allowed, "cattle-fleet-system")
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s %v: got %v, want %q", tc.secretNS, tc.allowed, err, tc.err)
		}
	}
}

func TestSecretIsFor(t *testing.T) {
	local := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-local", Name: "local"}}
	other := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-local", Name: "other"}}
	managed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-local", Name: "local-cluster",
		Labels: map[string]string{fleet.ManagedLabel: "true", fleet.ClusterLabel: "local", fleet.ClusterNamespaceLabel: "fleet-local"}}}
	unlabelled := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-local", Name: "old-local-cluster",
		Labels: map[string]string{fleet.ManagedLabel: "true"}}}
	users := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-local", Name: "mine"}}
	if err := secretIsFor(managed, local, "cattle-fleet-system"); err != nil {
		t.Errorf("the local cluster's own credential: %v", err)
	}
	if err := secretIsFor(managed, other, "cattle-fleet-system"); err == nil || !strings.Contains(err.Error(), "cannot be used for cluster fleet-local/other") {
		t.Errorf("the manager's credential for another cluster: %v", err)
	}
	if err := secretIsFor(unlabelled, local, "cattle-fleet-system"); err == nil {
		t.Error("a manager-written Secret that names no cluster serves none")
	}
	if err := secretIsFor(users, other, "cattle-fleet-system"); err != nil {
		t.Errorf("a user's own Secret: %v", err)
	}
	// In the manager's system namespace, only the credential it keeps for the Cluster.
	system := managed.DeepCopy()
	system.Namespace = "cattle-fleet-system"
	if err := secretIsFor(system, local, "cattle-fleet-system"); err != nil {
		t.Errorf("the local cluster's credential in the system namespace: %v", err)
	}
	if err := secretIsFor(system, other, "cattle-fleet-system"); err == nil {
		t.Error("the manager's credential serves another Cluster")
	}
	stray := users.DeepCopy()
	stray.Namespace = "cattle-fleet-system"
	if err := secretIsFor(stray, other, "cattle-fleet-system"); err == nil || !strings.Contains(err.Error(), "only the credential the manager keeps for it") {
		t.Errorf("another Secret of the system namespace: %v", err)
	}
}

func TestInlineRESTConfig(t *testing.T) {
	const head = `apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {cluster: k, user: u}
clusters:
- name: k
  cluster:
    server: https://downstream.example:6443
`
	for _, tc := range []struct {
		name, cluster, user string
		refused             []string
	}{
		{name: "inline token and CA data", cluster: "    certificate-authority-data: Y2E=\n", user: "    token: abc\n"},
		{name: "inline client certificate", user: "    client-certificate-data: Y2VydA==\n    client-key-data: a2V5\n"},
		{name: "exec plugin", user: "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh\n      args: [-c, 'touch /tmp/owned']\n",
			refused: []string{"users[u].exec"}},
		{name: "auth provider", user: "    auth-provider:\n      name: oidc\n      config: {}\n", refused: []string{"users[u].auth-provider"}},
		{name: "token file", user: "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n", refused: []string{"users[u].tokenFile"}},
		{name: "certificate files", cluster: "    certificate-authority: /etc/ca.crt\n",
			user:    "    client-certificate: /etc/tls.crt\n    client-key: /etc/tls.key\n",
			refused: []string{"clusters[k].certificate-authority", "users[u].client-certificate", "users[u].client-key"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := inlineRESTConfig([]byte(head + tc.cluster + "users:\n- name: u\n  user:\n" + tc.user))
			if len(tc.refused) == 0 {
				if err != nil || cfg.Host != "https://downstream.example:6443" {
					t.Fatalf("got %v, %v", cfg, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			for _, r := range tc.refused {
				if !strings.Contains(err.Error(), r) {
					t.Errorf("%v does not name %s", err, r)
				}
			}
		})
	}
	if _, err := inlineRESTConfig([]byte("apiVersion: v1\nkind: Config\n")); err == nil {
		t.Error("a kubeconfig without a current context is accepted")
	}
}

// An imported cluster's server may not be a link-local address (a cloud metadata service), by
// its text or by what its name resolves to, and what its apiserver answers reaches the
// Imported condition only as a status code and reason, never as the body.
func TestImportedServerNotLinkLocalAndNoBodyInStatus(t *testing.T) {
	kubeconfig := func(server string) []byte {
		return []byte("apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts:\n- name: c\n  context: {cluster: k, user: u}\n" +
			"clusters:\n- name: k\n  cluster:\n    server: " + server + "\nusers:\n- name: u\n  user:\n    token: abc\n")
	}
	for _, server := range []string{"http://169.254.169.254", "https://[fe80::1]:6443", "https://0.0.0.0:6443", "https://[::ffff:169.254.169.254]"} {
		if _, err := inlineRESTConfig(kubeconfig(server)); err == nil || !strings.Contains(err.Error(), "clusters[k].server") {
			t.Errorf("%s: %v", server, err)
		}
	}
	cfg, err := inlineRESTConfig(kubeconfig("https://metadata.internal.example:443"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Dial == nil {
		t.Fatal("no dialer checks the address a name resolves to")
	}
	if _, err := cfg.Dial(context.Background(), "tcp", "169.254.169.254:80"); !errors.Is(err, errUnreachable) {
		t.Fatalf("dialled a link-local address: %v", err)
	}
	body := apierrors.NewGenericServerResponse(http.StatusForbidden, "create", schema.GroupResource{Resource: "namespaces"}, "",
		`{"AccessKeyId":"ASIA...","SecretAccessKey":"stolen"}`, 0, true)
	if msg := importMessage(fmt.Errorf("applying the agent: %w", body)); strings.Contains(msg, "stolen") || !strings.Contains(msg, "403 Forbidden") {
		t.Fatalf("condition message: %s", msg)
	}
}

// What the controller remembers of a Cluster's import goes with the Cluster, and its key once
// the import is recorded; retries of one generation's import give one key.
func TestImportMemoryGoesWithTheCluster(t *testing.T) {
	h := &handler{mem: newMemory()}
	n := 0
	newKey := func() (string, error) { n++; return fmt.Sprint("key-", n), nil }
	k1, _ := h.mem.keyFor("ns/a", 1, newKey)
	k2, _ := h.mem.keyFor("ns/a", 1, newKey)
	if k1 != k2 {
		t.Fatalf("a retry of one generation's import gave another key: %s, %s", k1, k2)
	}
	if k3, _ := h.mem.keyFor("ns/a", 2, newKey); k3 == k1 {
		t.Fatal("a new redeployAgentGeneration reused the key")
	}
	h.mem.recorded("ns/a")
	now := time.Now()
	h.mem.importFailed("ns/b", 1, now)
	if !h.mem.failedLately("ns/b", 1, now) || h.mem.failedLately("ns/b", 2, now) {
		t.Fatal("a failure is remembered for its generation only")
	}
	if h.mem.size() != 1 {
		t.Fatalf("after the import was recorded, memory holds %d Clusters, want 1 (b's failure)", h.mem.size())
	}
	if _, err := h.onChange("ns/b", nil); err != nil {
		t.Fatal(err)
	}
	if h.mem.size() != 0 {
		t.Errorf("a deleted Cluster's import is remembered (%d)", h.mem.size())
	}
}
