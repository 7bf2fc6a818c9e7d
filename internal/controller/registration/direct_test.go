package registration

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fleetgo/fleet/internal/registration"
)

func TestEnsureWritesWhatDiffersOnly(t *testing.T) {
	ctx, ns := context.Background(), registration.AgentIdentityNamespace
	meta := metav1.ObjectMeta{Name: "agent", Namespace: ns, Labels: map[string]string{"fleet.cattle.io/cluster": "c1"}}
	kube := fake.NewSimpleClientset(
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns, Labels: map[string]string{"other": "kept"}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns, UID: "old"}, RoleRef: roleRef("ClusterRole", "elsewhere")},
	)
	if err := ensureServiceAccount(ctx, kube, &corev1.ServiceAccount{ObjectMeta: meta}); err != nil {
		t.Fatal(err)
	}
	sa, _ := kube.CoreV1().ServiceAccounts(ns).Get(ctx, "agent", metav1.GetOptions{})
	if sa.Labels["fleet.cattle.io/cluster"] != "c1" || sa.Labels["other"] != "kept" {
		t.Errorf("ServiceAccount labels %v: want its own kept and the identity's added", sa.Labels)
	}

	rules := registration.TokenRules("agent")
	if err := ensureRole(ctx, kube, &rbacv1.Role{ObjectMeta: meta, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	kube.ClearActions()
	if err := ensureRole(ctx, kube, &rbacv1.Role{ObjectMeta: meta, Rules: rules}); err != nil {
		t.Fatal(err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() == "update" {
			t.Errorf("an unchanged Role was updated")
		}
	}

	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "agent"}}
	if err := ensureRoleBinding(ctx, kube, &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: roleRef("Role", "agent"), Subjects: subjects}); err != nil {
		t.Fatal(err)
	}
	rb, _ := kube.RbacV1().RoleBindings(ns).Get(ctx, "agent", metav1.GetOptions{})
	if rb.RoleRef != roleRef("Role", "agent") || len(rb.Subjects) != 1 || rb.UID == "old" {
		t.Errorf("a binding to another role is replaced: got %+v", rb)
	}
}
