// Package ensure creates (or brings up to date) the identities, permissions and Secrets the
// manager's controllers hand out: registration tokens, agents and GitRepo Jobs.
package ensure

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ServiceAccount creates a ServiceAccount unless it exists.
func ServiceAccount(ctx context.Context, kube kubernetes.Interface, ns, name string, owner []metav1.OwnerReference, labels map[string]string) error {
	_, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: name, Namespace: ns, OwnerReferences: owner, Labels: labels}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating service account %s/%s: %w", ns, name, err)
	}
	return nil
}

// Role creates a Role, or sets the rules of the one there.
func Role(ctx context.Context, kube kubernetes.Interface, ns, name string, rules []rbacv1.PolicyRule, owner []metav1.OwnerReference, labels map[string]string) error {
	want := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owner, Labels: labels}, Rules: rules}
	_, err := kube.RbacV1().Roles(ns).Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := kube.RbacV1().Roles(ns).Get(ctx, name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		cur.Rules = rules
		_, err = kube.RbacV1().Roles(ns).Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing role %s/%s: %w", ns, name, err)
	}
	return nil
}

// RoleBinding binds a ServiceAccount to a Role or ClusterRole (roleKind) unless the binding exists.
func RoleBinding(ctx context.Context, kube kubernetes.Interface, ns, name, roleKind, role, saNS, sa string, owner []metav1.OwnerReference, labels map[string]string) error {
	_, err := kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, OwnerReferences: owner, Labels: labels},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: roleKind, Name: role},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: sa}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating role binding %s/%s: %w", ns, name, err)
	}
	return nil
}

// Secret creates a Secret, or sets the data and labels of the one there.
func Secret(ctx context.Context, kube kubernetes.Interface, s *corev1.Secret) error {
	_, err := kube.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := kube.CoreV1().Secrets(s.Namespace).Get(ctx, s.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		cur.Data, cur.Labels = s.Data, s.Labels
		_, err = kube.CoreV1().Secrets(s.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing secret %s/%s: %w", s.Namespace, s.Name, err)
	}
	return nil
}
