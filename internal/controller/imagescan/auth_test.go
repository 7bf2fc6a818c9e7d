package imagescan

import (
	"strings"
	"testing"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// secrets is a Secret cache holding a few Secrets (Get only).
type secrets struct {
	corecontrollers.SecretCache
	items map[string]*corev1.Secret
}

func (s secrets) Get(ns, name string) (*corev1.Secret, error) {
	if sec, ok := s.items[ns+"/"+name]; ok {
		return sec, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

// A username and password go only to the registry their Secret names, and no Secret that is a
// credential of the manager or a cluster is used.
func TestRegistryAuthSendsCredentialsOnlyWhereTheyBelong(t *testing.T) {
	basic := func(name, registry string) *corev1.Secret {
		d := map[string][]byte{"username": []byte("u"), "password": []byte("p")}
		if registry != "" {
			d["registry"] = []byte(registry)
		}
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: d}
	}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "token"}, Type: secretuse.RegistrationValuesType,
		Data: map[string][]byte{"username": []byte("u"), "password": []byte("p")}}
	h := &handler{Deps: Deps{Secrets: secrets{items: map[string]*corev1.Secret{
		"ns/named": basic("named", "registry.example:5000"), "ns/unnamed": basic("unnamed", ""), "ns/token": token}}}}
	scan := func(secret string) *fleet.ImageScan {
		return &fleet.ImageScan{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"},
			Spec: fleet.ImageScanSpec{SecretRef: &corev1.LocalObjectReference{Name: secret}}}
	}
	if _, err := h.registryAuth(scan("named"), "registry.example:5000"); err != nil {
		t.Errorf("the registry the Secret names: %v", err)
	}
	for _, tc := range []struct{ secret, registry, want string }{
		{"named", "evil.example", `are for registry "registry.example:5000"`},
		{"unnamed", "registry.example:5000", `are for registry ""`},
		{"token", "registry.example:5000", "holds a registration token"},
	} {
		if _, err := h.registryAuth(scan(tc.secret), tc.registry); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s for %s: %v, want %q", tc.secret, tc.registry, err, tc.want)
		}
	}
}
