package secretuse

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestCheck(t *testing.T) {
	g := Guard{Kubeconfig: func(ns, name string) bool { return ns == "fleet-default" && name == "edge-kubeconfig" }}
	secret := func(name string, typ corev1.SecretType, labels map[string]string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, Labels: labels}, Type: typ}
	}
	for _, tc := range []struct {
		s    *corev1.Secret
		want string
	}{
		{s: secret("app-creds", corev1.SecretTypeOpaque, nil)},
		{s: secret("chart-auth", corev1.SecretTypeBasicAuth, map[string]string{"team": "a"})},
		{s: secret("sa-token", corev1.SecretTypeServiceAccountToken, nil), want: "a ServiceAccount token"},
		{s: secret("token", RegistrationValuesType, nil), want: "a registration token"},
		{s: secret("import-x", corev1.SecretTypeOpaque, map[string]string{registration.TokenLabel: "x"}), want: "a registration token"},
		{s: secret("c-123", registration.CredentialSecretType, nil), want: "an agent's credential"},
		{s: secret("local-cluster", corev1.SecretTypeOpaque, map[string]string{fleet.ManagedLabel: "true"}), want: "keeps it for itself"},
		{s: secret("edge-kubeconfig", corev1.SecretTypeOpaque, nil), want: "the kubeConfigSecret of a Cluster"},
	} {
		err := g.Check(tc.s, "downstreamResources")
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.s.Name, err)
			}
			continue
		}
		var r *Refused
		if !errors.As(err, &r) || !strings.Contains(err.Error(), tc.want) ||
			!strings.Contains(err.Error(), "downstreamResources: secret fleet-default/"+tc.s.Name) {
			t.Errorf("%s: got %v, want %q", tc.s.Name, err, tc.want)
		}
	}
}
