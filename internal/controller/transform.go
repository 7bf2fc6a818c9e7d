package controller

import (
	"unique"

	"github.com/rancher/wrangler/v3/pkg/apply"
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The manager caches every Cluster, Bundle, BundleDeployment and Content of the management
// cluster, so what it keeps of each object decides its memory. These transforms run as objects
// enter the caches and drop or share what no controller reads. Cached objects are never
// modified in place (handlers copy before writing), so sharing is safe.

// stripManagedFields drops the server-side-apply bookkeeping; the manager writes with Update,
// and an update without managedFields leaves the stored ones alone.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// slimDeployment also lets a BundleDeployment whose staged options were promoted share one copy
// of them (they are equal for every deployment not held back by a rollout), and shares the
// strings that thousands of deployments repeat: label keys and values (bundle, content, commit),
// deployment IDs, names. Measured on the benchmark's deployments this takes a cached one from
// about 4 KiB to 2 KiB.
func slimDeployment(obj any) (any, error) {
	obj, _ = stripManagedFields(obj)
	bd, ok := obj.(*fleet.BundleDeployment)
	if !ok {
		return obj, nil
	}
	if bd.Spec.StagedDeploymentID == bd.Spec.DeploymentID && equality.Semantic.DeepEqual(bd.Spec.StagedOptions, bd.Spec.Options) {
		bd.Spec.Options = bd.Spec.StagedOptions
	}
	// The manager compares and writes values, never reads them.
	bd.Spec.StagedOptions.CompactValues()
	bd.Spec.Options.CompactValues()
	if bd.Labels != nil {
		labels := make(map[string]string, len(bd.Labels))
		for k, v := range bd.Labels {
			labels[intern(k)] = intern(v)
		}
		bd.Labels = labels
	}
	bd.APIVersion, bd.Kind = intern(bd.APIVersion), intern(bd.Kind)
	bd.Name, bd.Namespace = intern(bd.Name), intern(bd.Namespace)
	bd.Spec.DeploymentID = intern(bd.Spec.DeploymentID)
	bd.Spec.StagedDeploymentID = intern(bd.Spec.StagedDeploymentID)
	bd.Status.AppliedDeploymentID = intern(bd.Status.AppliedDeploymentID)
	// What agents report repeats too: the same condition types, states and seconds, displays
	// and resource kinds in every deployment of a rollout.
	internConditions(bd.Status.Conditions)
	d := &bd.Status.Display
	d.Deployed, d.Monitored, d.State = intern(d.Deployed), intern(d.Monitored), intern(d.State)
	for i := range bd.Status.Resources {
		r := &bd.Status.Resources[i]
		r.Kind, r.APIVersion, r.Namespace = intern(r.Kind), intern(r.APIVersion), intern(r.Namespace)
	}
	return bd, nil
}

// slimCluster shares what Clusters repeat: label keys and values, condition types, states and
// times, the display, and the agent settings' hashes and manager address, equal for every cluster
// of one configuration.
func slimCluster(obj any) (any, error) {
	obj, _ = stripManagedFields(obj)
	c, ok := obj.(*fleet.Cluster)
	if !ok {
		return obj, nil
	}
	slimMeta(c)
	s := &c.Status
	internConditions(s.Conditions)
	s.Display.ReadyBundles, s.Display.State = intern(s.Display.ReadyBundles), intern(s.Display.State)
	for _, f := range []*string{&s.AgentEnvVarsHash, &s.AgentPrivateRepoURL, &s.AgentAffinityHash, &s.AgentResourcesHash,
		&s.AgentTolerationsHash, &s.AgentSchedulingCustomizationHash, &s.APIServerURL, &s.APIServerCAHash, &s.AgentTLSMode,
		&s.Agent.Namespace} {
		*f = intern(*f)
	}
	return c, nil
}

// internConditions shares the strings conditions repeat across objects; messages stay as they
// are (they name the object).
func internConditions(cs []genericcondition.GenericCondition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Status, c.Reason = intern(c.Type), corev1.ConditionStatus(intern(string(c.Status))), intern(c.Reason)
		c.LastUpdateTime, c.LastTransitionTime = intern(c.LastUpdateTime), intern(c.LastTransitionTime)
	}
}

// intern returns the canonical copy of s; unused copies are collected.
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// slimContent drops the compressed manifest: the manager only counts references to Contents
// and deletes unused ones (writes that go to the status subresource or delete); agents read
// the manifest from the apiserver.
func slimContent(obj any) (any, error) {
	obj, _ = stripManagedFields(obj)
	if c, ok := obj.(*fleet.Content); ok {
		c.Content = nil
	}
	return obj, nil
}

// slimOwned is for the kinds the manager keeps several of per registered cluster (identities,
// roles and bindings, credentials, the cluster namespace, registrations): they repeat each
// other's strings (label and annotation keys, the set's ID, hash and owner, the cluster's names,
// role rules), so it shares them. The applied-state annotation, unique to each object, is kept
// as it is: the apply sets compare against it. A registration credential's data is for the agent
// that picks it up and is never read back by the manager (its set is written once and later
// deleted), so the cache drops it. Measured on a 1,000-cluster run's objects, a cached binding
// takes 1.9 KiB instead of 2.5, a role 1.9 instead of 2.4, a ServiceAccount 1.6 instead of 2.0
// and a credential 2.1 instead of 5.1.
func slimOwned(obj any) (any, error) {
	obj, _ = stripManagedFields(obj)
	m, err := meta.Accessor(obj)
	if err != nil {
		return obj, nil
	}
	slimMeta(m)
	switch o := obj.(type) {
	case *rbacv1.Role:
		internRules(o.Rules)
	case *rbacv1.ClusterRole:
		internRules(o.Rules)
	case *rbacv1.RoleBinding:
		internBinding(&o.RoleRef, o.Subjects)
	case *rbacv1.ClusterRoleBinding:
		internBinding(&o.RoleRef, o.Subjects)
	case *corev1.Secret:
		o.Type = corev1.SecretType(intern(string(o.Type)))
		if o.Type == registration.CredentialSecretType {
			o.Data = nil
		}
	}
	return obj, nil
}

func slimMeta(m metav1.Object) {
	m.SetName(intern(m.GetName()))
	m.SetNamespace(intern(m.GetNamespace()))
	if l := m.GetLabels(); l != nil {
		m.SetLabels(internMap(l, ""))
	}
	if a := m.GetAnnotations(); a != nil {
		m.SetAnnotations(internMap(a, apply.LabelApplied))
	}
}

// internMap shares a map's keys and values, but for the value of key own (which no other
// object has).
func internMap(in map[string]string, own string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if k != own {
			v = intern(v)
		}
		out[intern(k)] = v
	}
	return out
}

func internRules(rules []rbacv1.PolicyRule) {
	for i := range rules {
		for _, l := range [][]string{rules[i].APIGroups, rules[i].Resources, rules[i].Verbs, rules[i].ResourceNames, rules[i].NonResourceURLs} {
			for j := range l {
				l[j] = intern(l[j])
			}
		}
	}
}

func internBinding(ref *rbacv1.RoleRef, subjects []rbacv1.Subject) {
	ref.APIGroup, ref.Kind, ref.Name = intern(ref.APIGroup), intern(ref.Kind), intern(ref.Name)
	for i := range subjects {
		s := &subjects[i]
		s.APIGroup, s.Kind, s.Name, s.Namespace = intern(s.APIGroup), intern(s.Kind), intern(s.Name), intern(s.Namespace)
	}
}
