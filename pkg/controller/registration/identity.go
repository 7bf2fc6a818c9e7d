package registration

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/ensure"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/logfields"
	"github.com/fleetgo/fleet/pkg/names"
	"github.com/fleetgo/fleet/pkg/registration"
	"github.com/fleetgo/fleet/pkg/target"
)

// identity makes sure of a Cluster's agent identity in its cluster namespace and of what it may
// do: read its BundleDeployments and Contents, write their status and its own Cluster's status,
// and renew its credential.
func identity(ctx context.Context, kube kubernetes.Interface, c *fleet.Cluster) error {
	ns, sa := target.ClusterNamespace(c), registration.AgentServiceAccount
	owner := []metav1.OwnerReference{{APIVersion: fleet.SchemeGroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID}}
	if err := ensure.ServiceAccount(ctx, kube, ns, sa, nil, nil); err != nil {
		return err
	}
	if err := ensure.Role(ctx, kube, ns, sa, registration.AgentRules(), nil, nil); err != nil {
		return err
	}
	if err := ensure.RoleBinding(ctx, kube, ns, sa, "Role", sa, ns, sa, nil, nil); err != nil {
		return err
	}
	statusRole := names.SafeConcatName("fleet-agent", c.Name)
	if err := ensure.Role(ctx, kube, c.Namespace, statusRole, registration.ClusterStatusRules(c.Name), owner, nil); err != nil {
		return err
	}
	if err := ensure.RoleBinding(ctx, kube, c.Namespace, statusRole, "Role", statusRole, ns, sa, owner, nil); err != nil {
		return err
	}
	_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: names.SafeConcatName("fleet-content", ns),
			Labels: map[string]string{fleet.ClusterLabel: c.Name, fleet.ClusterNamespaceLabel: c.Namespace}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: registration.ContentReaderRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the content binding of cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	return nil
}

// adopter takes over Clusters this manager did not register but whose agent has checked in:
// ones a Fleet manager registered before the move (or registrations of an earlier version of
// this manager). Each gets the agent identity registration would have given it, and the
// identities already in its cluster namespace (Fleet's, one per past registration, holding
// tokens that never expire) may trade their token for an expiring one of that identity. The
// agent does so as it starts: it keeps its Cluster and is not registered again. Once done, the
// Cluster is annotated and left alone.
type adopter struct {
	kube     kubernetes.Interface
	clusters fleetcontrollers.ClusterController
}

func (a *adopter) onChange(_ string, c *fleet.Cluster) (*fleet.Cluster, error) {
	if c == nil || c.DeletionTimestamp != nil || c.Spec.KubeConfigSecret != "" || c.Annotations[registration.IdentityAnnotation] != "" {
		return c, nil
	}
	if c.Status.Agent.LastSeen.IsZero() {
		return c, nil // no agent has checked in as it: nothing to take over (registration grants the identity)
	}
	ns := target.ClusterNamespace(c)
	if c.Status.Namespace != ns {
		return c, nil // the cluster controller gives it its namespace first (a status change: here again)
	}
	ctx := context.Background()
	if err := identity(ctx, a.kube, c); err != nil {
		return c, err
	}
	if err := ensure.Role(ctx, a.kube, ns, registration.ExchangeRole, registration.ExchangeRules(), nil, nil); err != nil {
		return c, err
	}
	_, err := a.kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: registration.ExchangeRole, Namespace: ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: registration.ExchangeRole},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + ns}},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return c, fmt.Errorf("letting the agents of cluster %s/%s trade their credential: %w", c.Namespace, c.Name, err)
	}
	c = c.DeepCopy()
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[registration.IdentityAnnotation] = registration.AgentServiceAccount
	logrus.WithFields(logfields.For("cluster-identity", c.Namespace, c.Name)).
		Info("took over a cluster registered before this manager: its agent may trade its credential for an expiring one")
	return a.clusters.Update(c)
}
