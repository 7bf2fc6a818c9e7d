package registration

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/registration"
)

// The objects of the agent identity namespace (each agent's ServiceAccount, its token Role and
// binding, and a taken-over cluster's exchange binding) are written and deleted by name, not as
// apply sets: apply sets read what exists from the manager's caches, and these objects, several
// per registered cluster and each read only when its cluster registers or goes, would be a large
// part of the manager's heap (about 5 KiB per cluster, 50 MiB at 10,000 clusters). The caches
// leave the namespace out (IdentityNamespaceUncached). Their names follow from the cluster
// namespace, so nothing has to be listed to find them.

// IdentityNamespaceUncached is the field selector that leaves the agent identity namespace out
// of a ServiceAccount, Role or RoleBinding cache.
const IdentityNamespaceUncached = "metadata.namespace!=" + registration.AgentIdentityNamespace

// client is what ensure needs of a typed client of one kind.
type client[T any] interface {
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
}

// ensure creates want (named name) unless it exists. An existing one is passed to fix, which
// returns it changed to what want says, or nil when it already is.
func ensure[T any](ctx context.Context, c client[T], name string, want T, fix func(old T) *T) error {
	_, err := c.Create(ctx, want, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	old, err := c.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if fixed := fix(old); fixed != nil {
		_, err = c.Update(ctx, *fixed, metav1.UpdateOptions{})
	}
	return err
}

// ensureServiceAccount creates sa unless it exists, and gives an existing one sa's labels.
func ensureServiceAccount(ctx context.Context, kube kubernetes.Interface, sa *corev1.ServiceAccount) error {
	return ensure(ctx, kube.CoreV1().ServiceAccounts(sa.Namespace), sa.Name, sa, func(old *corev1.ServiceAccount) **corev1.ServiceAccount {
		if hasLabels(old.Labels, sa.Labels) {
			return nil
		}
		old = old.DeepCopy()
		old.Labels = withLabels(old.Labels, sa.Labels)
		return &old
	})
}

// ensureRole creates role unless it exists, and gives an existing one role's rules and labels.
func ensureRole(ctx context.Context, kube kubernetes.Interface, role *rbacv1.Role) error {
	return ensure(ctx, kube.RbacV1().Roles(role.Namespace), role.Name, role, func(old *rbacv1.Role) **rbacv1.Role {
		if hasLabels(old.Labels, role.Labels) && equality.Semantic.DeepEqual(old.Rules, role.Rules) {
			return nil
		}
		old = old.DeepCopy()
		old.Labels, old.Rules = withLabels(old.Labels, role.Labels), role.Rules
		return &old
	})
}

// ensureRoleBinding creates rb unless it exists, and gives an existing one rb's subjects and
// labels; one bound to another role (a binding's role cannot change) is deleted and made again.
func ensureRoleBinding(ctx context.Context, kube kubernetes.Interface, rb *rbacv1.RoleBinding) error {
	c := kube.RbacV1().RoleBindings(rb.Namespace)
	var replace *rbacv1.RoleBinding
	err := ensure(ctx, c, rb.Name, rb, func(old *rbacv1.RoleBinding) **rbacv1.RoleBinding {
		if old.RoleRef != rb.RoleRef {
			replace = old
			return nil
		}
		if hasLabels(old.Labels, rb.Labels) && slices.Equal(old.Subjects, rb.Subjects) {
			return nil
		}
		old = old.DeepCopy()
		old.Labels, old.Subjects = withLabels(old.Labels, rb.Labels), rb.Subjects
		return &old
	})
	if err != nil || replace == nil {
		return err
	}
	err = c.Delete(ctx, rb.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &replace.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, err = c.Create(ctx, rb, metav1.CreateOptions{})
	return err
}

// deleteIdentityObjects deletes the named objects of the agent identity namespace; ones already
// gone are fine.
func deleteIdentityObjects(ctx context.Context, kube kubernetes.Interface, serviceAccounts, roles, roleBindings []string) error {
	ns := registration.AgentIdentityNamespace
	for _, d := range []struct {
		names []string
		del   func(context.Context, string, metav1.DeleteOptions) error
	}{
		{roleBindings, kube.RbacV1().RoleBindings(ns).Delete},
		{roles, kube.RbacV1().Roles(ns).Delete},
		{serviceAccounts, kube.CoreV1().ServiceAccounts(ns).Delete},
	} {
		for _, name := range d.names {
			if err := d.del(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting %s/%s: %w", ns, name, err)
			}
		}
	}
	return nil
}

func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func withLabels(have, want map[string]string) map[string]string {
	out := maps.Clone(have)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, want)
	return out
}
