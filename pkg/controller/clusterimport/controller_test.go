package clusterimport

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	} {
		err := secretNamespaceAllowed(c, tc.secretNS, tc.allowed)
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
	if err := secretIsFor(managed, local); err != nil {
		t.Errorf("the local cluster's own credential: %v", err)
	}
	if err := secretIsFor(managed, other); err == nil || !strings.Contains(err.Error(), "cannot be used for cluster fleet-local/other") {
		t.Errorf("the manager's credential for another cluster: %v", err)
	}
	if err := secretIsFor(unlabelled, local); err == nil {
		t.Error("a manager-written Secret that names no cluster serves none")
	}
	if err := secretIsFor(users, other); err != nil {
		t.Errorf("a user's own Secret: %v", err)
	}
}
