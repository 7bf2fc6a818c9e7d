package registration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/rancher/wrangler/v3/pkg/apply"
	rbaccontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/rbac/v1"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/registration"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Apply sets of a Cluster's agent: the binding of its identity in its cluster namespace (given at
// registration, or when a Cluster registered elsewhere is taken over; the objects of the identity
// in the agent identity namespace are written by name, see direct.go). legacyIdentitySet is the
// identity this manager gave before agent ServiceAccounts moved to one namespace (a
// ServiceAccount in the cluster namespace and a ClusterRoleBinding per cluster): a Cluster that
// has one keeps it, so its agent goes on working until it has traded its credential, and loses
// it with the Cluster.
const (
	identitySet       = "fleet-agent-identity-v2"
	legacyIdentitySet = "fleet-agent-identity"
	// clusterStatusSet, with the namespace's name, is the binding of ClusterStatusRole in a
	// namespace with registered Clusters: one per namespace, shared by its Clusters' agents.
	clusterStatusSet = "fleet-agent-cluster-status"
)

// identity gives a Cluster's agent its identity, its ServiceAccount in the agent identity
// namespace, and what it may do: read its BundleDeployments (the shared ClusterRole, bound in its
// cluster namespace: an apply set), write their status, and renew its credential (a Role and
// binding of its own, written by name like the ServiceAccount: see direct.go). Contents it reads
// through the one binding shared by every agent (sharedRoles); its Cluster's status it patches
// through the one binding shared by the agents of the Cluster's namespace, which the admission
// policy fleet-agent-cluster-status narrows to its own Cluster (the one whose IdentityAnnotation
// names it). Applying the identity of a Cluster registered before that binding existed also
// removes the status Role and RoleBinding it had of its own.
func identity(ctx context.Context, kube kubernetes.Interface, a apply.Apply, rbs rbaccontrollers.RoleBindingCache, c *fleet.Cluster) error {
	ns := target.ClusterNamespace(c)
	idNS, sa := registration.AgentIdentityNamespace, registration.AgentServiceAccount(ns)
	labels := map[string]string{fleet.ClusterLabel: c.Name, fleet.ClusterNamespaceLabel: c.Namespace}
	own := metav1.ObjectMeta{Name: sa, Namespace: idNS, Labels: labels}
	agent := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: idNS, Name: sa}}
	fail := func(err error) error {
		return fmt.Errorf("granting the agent identity of cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	// First the shared status binding: the set below drops a Cluster's own one, if it had one.
	if err := statusBinding(a, rbs, c.Namespace); err != nil {
		return err
	}
	if err := ensureServiceAccount(ctx, kube, &corev1.ServiceAccount{ObjectMeta: own}); err != nil {
		return fail(err)
	}
	if err := ensureRole(ctx, kube, &rbacv1.Role{ObjectMeta: own, Rules: registration.TokenRules(sa)}); err != nil {
		return fail(err)
	}
	if err := ensureRoleBinding(ctx, kube, &rbacv1.RoleBinding{ObjectMeta: own, RoleRef: roleRef("Role", sa), Subjects: agent}); err != nil {
		return fail(err)
	}
	err := a.WithSetID(identitySet).WithOwner(c).ApplyObjects(
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: registration.AgentRole, Namespace: ns}, RoleRef: roleRef("ClusterRole", registration.AgentRole), Subjects: agent},
	)
	if err != nil {
		return fail(err)
	}
	return nil
}

// statusBinding binds ClusterStatusRole in namespace ns to every agent identity. It applies the
// binding only when the cache does not hold it as wanted: every registration in a namespace
// wants the same set, and wrangler applies one set at most about once a second (in a storm of
// 5,000 registrations each one waited for it).
func statusBinding(a apply.Apply, rbs rbaccontrollers.RoleBindingCache, ns string) error {
	want := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: registration.ClusterStatusRole, Namespace: ns},
		RoleRef: roleRef("ClusterRole", registration.ClusterStatusRole), Subjects: []rbacv1.Subject{registration.AgentIdentities()}}
	if rbs != nil {
		if rb, err := rbs.Get(ns, want.Name); err == nil && rb.RoleRef == want.RoleRef && slices.Equal(rb.Subjects, want.Subjects) {
			return nil
		}
	}
	if err := a.WithSetID(names.SafeConcatName(clusterStatusSet, ns)).ApplyObjects(want); err != nil {
		return fmt.Errorf("letting the agents of namespace %s check in: %w", ns, err)
	}
	return nil
}

func roleRef(kind, name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: name}
}

// Revoke takes a Cluster's agent identity and permissions away: its ServiceAccount, token Role
// and bindings in the agent identity namespace by name, and its sets applied empty. Tokens of a
// deleted ServiceAccount are refused at once, so the agent loses access immediately, before the
// namespace (and whatever else is in it) is gone.
func Revoke(ctx context.Context, a apply.Apply, kube kubernetes.Interface) func(*fleet.Cluster) error {
	return func(c *fleet.Cluster) error {
		sa := registration.AgentServiceAccount(target.ClusterNamespace(c))
		err := deleteIdentityObjects(ctx, kube, []string{sa}, []string{sa}, []string{sa, exchangeBinding(sa)})
		if err != nil {
			return fmt.Errorf("revoking the agent of cluster %s/%s: %w", c.Namespace, c.Name, err)
		}
		for _, set := range []string{identitySet, legacyIdentitySet} {
			if err := a.WithSetID(set).WithOwner(c).ApplyObjects(); err != nil {
				return fmt.Errorf("revoking the agent of cluster %s/%s: %w", c.Namespace, c.Name, err)
			}
		}
		return nil
	}
}

// exchangeBinding is the name of the binding that lets the identities of a taken-over cluster's
// namespace trade their credential for one of agent ServiceAccount sa.
func exchangeBinding(sa string) string { return names.SafeConcatName(sa, "exchange") }

// adopter takes over Clusters this manager did not register but whose agent has checked in:
// ones a Fleet manager registered before the move, and ones this manager registered before agent
// identities moved to their own namespace (their annotation names the old identity). Each gets
// the agent identity registration would have given it, and the identities already in its cluster
// namespace (Fleet's, one per past registration, holding tokens that never expire; or this
// manager's old one) may trade their token for an expiring one of that identity. The agent does
// so as it starts: it keeps its Cluster and is not registered again. Once done, the Cluster is
// annotated and left alone.
type adopter struct {
	ctx          context.Context
	kube         kubernetes.Interface
	apply        apply.Apply
	roleBindings rbaccontrollers.RoleBindingCache
	clusters     fleetcontrollers.ClusterController
}

func (a *adopter) onChange(_ string, c *fleet.Cluster) (*fleet.Cluster, error) {
	if c == nil || c.DeletionTimestamp != nil {
		return c, nil
	}
	ns := target.ClusterNamespace(c)
	if c.Annotations[registration.IdentityAnnotation] == registration.AgentIdentity(ns) {
		return c, nil
	}
	if a.granted(ns) {
		// This manager's identity, on a Cluster not annotated with it: one made ahead of time
		// (the local cluster, an import) that an earlier build registered. The admission policy
		// lets its agent check in only once it is; its identity is applied again first (the
		// namespace's shared status binding; the status Role it had of its own goes).
		if err := identity(a.ctx, a.kube, a.apply, a.roleBindings, c); err != nil {
			return c, err
		}
		return a.annotate(c, ns, "named the agent identity this manager gave the cluster")
	}
	if c.Spec.KubeConfigSecret != "" {
		return c, nil
	}
	if c.Status.Agent.LastSeen.IsZero() {
		return c, nil // no agent has checked in as it: nothing to take over (registration grants the identity)
	}
	if c.Status.Namespace != ns {
		return c, nil // the cluster controller gives it its namespace first (a status change: here again)
	}
	if err := identity(a.ctx, a.kube, a.apply, a.roleBindings, c); err != nil {
		return c, err
	}
	// The agent's own token Role, bound to every ServiceAccount of the cluster namespace.
	sa := registration.AgentServiceAccount(ns)
	err := ensureRoleBinding(a.ctx, a.kube, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: exchangeBinding(sa), Namespace: registration.AgentIdentityNamespace,
			Labels: map[string]string{fleet.ClusterLabel: c.Name, fleet.ClusterNamespaceLabel: c.Namespace}},
		RoleRef:  roleRef("Role", sa),
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + ns}}})
	if err != nil {
		return c, fmt.Errorf("letting the agents of cluster %s/%s trade their credential: %w", c.Namespace, c.Name, err)
	}
	return a.annotate(c, ns, "took over a cluster registered before this manager: its agent may trade its credential for an expiring one")
}

// granted says whether this manager gave the agent identity of cluster namespace ns: its
// BundleDeployment binding there names it.
func (a *adopter) granted(ns string) bool {
	if a.roleBindings == nil {
		return false
	}
	rb, err := a.roleBindings.Get(ns, registration.AgentRole)
	return err == nil && slices.Contains(rb.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind,
		Namespace: registration.AgentIdentityNamespace, Name: registration.AgentServiceAccount(ns)})
}

// annotate names the Cluster's agent identity on it, and logs what.
func (a *adopter) annotate(c *fleet.Cluster, ns, what string) (*fleet.Cluster, error) {
	logrus.WithFields(logfields.For("cluster-identity", c.Namespace, c.Name)).Info(what)
	return nameIdentity(a.clusters, c, ns)
}

// nameIdentity annotates Cluster c with the agent identity of its namespace ns, unless it already
// is: the admission policy lets an agent check in only on the Cluster that names it. A merge
// patch, so that it cannot conflict with the agent's check-ins.
func nameIdentity(clusters fleetcontrollers.ClusterClient, c *fleet.Cluster, ns string) (*fleet.Cluster, error) {
	want := registration.AgentIdentity(ns)
	if c.Annotations[registration.IdentityAnnotation] == want {
		return c, nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{registration.IdentityAnnotation: want}}})
	if err != nil {
		return c, err
	}
	out, err := clusters.Patch(c.Namespace, c.Name, types.MergePatchType, patch)
	if err != nil {
		return c, fmt.Errorf("naming the agent identity of cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	return out, nil
}
