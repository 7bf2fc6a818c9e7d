package registration

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A Cluster holding a registration key's hash is granted to a registration only with that key,
// or once an administrator allows the next one; one holding none keeps the rules of clientIDs.
func TestKeyProof(t *testing.T) {
	key, hash, err := registration.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	other, _, _ := registration.NewKey()
	for _, c := range []struct {
		name            string
		clusterAnn      map[string]string
		presented       string
		proven, refused bool
		refusalMentions string
	}{
		{"a Cluster without a key", nil, "", false, false, ""},
		{"a Cluster without a key, a key presented", nil, key, false, false, ""},
		{"the key", map[string]string{registration.KeyHashAnnotation: hash}, key, true, false, ""},
		{"no key", map[string]string{registration.KeyHashAnnotation: hash}, "", false, true, "carries no registration key"},
		{"another key", map[string]string{registration.KeyHashAnnotation: hash}, other, false, true, "carries another registration key"},
		{"the hash itself as the key", map[string]string{registration.KeyHashAnnotation: hash}, hash, false, true, "carries another registration key"},
		{"no key, allowed by an administrator", map[string]string{registration.KeyHashAnnotation: hash, registration.AllowReregistrationAnnotation: "true"}, "", false, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Annotations: c.clusterAnn}}
			reg := &fleet.ClusterRegistration{}
			if c.presented != "" {
				reg.Annotations = map[string]string{registration.KeyAnnotation: c.presented}
			}
			proven, why := keyProof(reg, cluster)
			if proven != c.proven || (why != "") != c.refused {
				t.Fatalf("proven %v, refused %q; want proven %v, refused %v", proven, why, c.proven, c.refused)
			}
			if c.refused && (!strings.Contains(why, c.refusalMentions) || !strings.Contains(why, registration.AllowReregistrationAnnotation)) {
				t.Errorf("the refusal %q does not say %q and how to let an agent in", why, c.refusalMentions)
			}
		})
	}
}
