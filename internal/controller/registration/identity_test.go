package registration

import (
	"testing"

	"github.com/rancher/wrangler/v3/pkg/apply/fake"
	"github.com/rancher/wrangler/v3/pkg/generic"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetgo/fleet/internal/registration"
)

// The namespace's status binding is applied only when the cache does not hold it as wanted:
// every registration in the namespace asks for it, and wrangler applies one set about once a
// second.
func TestStatusBindingAppliedOnlyWhenMissing(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	rbs := generic.NewCache[*rbacv1.RoleBinding](indexer, rbacv1.Resource("rolebindings"))
	a := &fake.FakeApply{}

	if err := statusBinding(a, rbs, "fleet-default"); err != nil {
		t.Fatal(err)
	}
	if a.Count != 1 {
		t.Fatalf("a missing binding is applied: %d applies", a.Count)
	}
	got := a.Objects[0].All()
	if len(got) != 1 {
		t.Fatalf("one object, got %d", len(got))
	}
	rb := got[0].(*rbacv1.RoleBinding)
	if rb.Namespace != "fleet-default" || rb.RoleRef.Name != registration.ClusterStatusRole || rb.RoleRef.Kind != "ClusterRole" ||
		len(rb.Subjects) != 1 || rb.Subjects[0] != registration.AgentIdentities() {
		t.Fatalf("unexpected binding %+v", rb)
	}

	// As the cache shows it: nothing to apply.
	if err := indexer.Add(rb.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := statusBinding(a, rbs, "fleet-default"); err != nil || a.Count != 1 {
		t.Fatalf("a binding already there is applied again: %d applies, %v", a.Count, err)
	}
	// Another namespace has none yet.
	if err := statusBinding(a, rbs, "other"); err != nil || a.Count != 2 {
		t.Fatalf("another namespace's binding: %d applies, %v", a.Count, err)
	}
	// Changed by someone: applied again, to put it back.
	changed := rb.DeepCopy()
	changed.Subjects = append(changed.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, Name: "intruder"})
	changed.ObjectMeta = metav1.ObjectMeta{Name: rb.Name, Namespace: rb.Namespace}
	if err := indexer.Update(changed); err != nil {
		t.Fatal(err)
	}
	if err := statusBinding(a, rbs, "fleet-default"); err != nil || a.Count != 3 {
		t.Fatalf("a changed binding is not put back: %d applies, %v", a.Count, err)
	}
}
