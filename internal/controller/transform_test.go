package controller

import (
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/rancher/wrangler/v3/pkg/apply"
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func deployment(stagedReplicas float64) *fleet.BundleDeployment {
	opts := func(r float64) fleet.BundleDeploymentOptions {
		return fleet.BundleDeploymentOptions{DefaultNamespace: "app", Helm: &fleet.HelmOptions{
			Values: &fleet.GenericMap{Data: map[string]any{"replicas": r}}}}
	}
	return &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "cluster-ns", Labels: map[string]string{fleet.BundleLabel: "b"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "fleet"}}},
		Spec: fleet.BundleDeploymentSpec{
			StagedOptions: opts(stagedReplicas), StagedDeploymentID: "s-1:a",
			Options: opts(1), DeploymentID: "s-1:a",
		},
	}
}

func TestSlimDeployment(t *testing.T) {
	bd := deployment(1)
	want := bd.DeepCopy()
	want.ManagedFields = nil
	out, err := slimDeployment(bd)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*fleet.BundleDeployment)
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("the cached deployment writes differently from the stored one:\n%s\n%s", gotJSON, wantJSON)
	}
	if got.Spec.Options.Helm != got.Spec.StagedOptions.Helm {
		t.Fatal("equal promoted options are shared")
	}
	if got.Spec.Options.Helm.Values.Data != nil || got.Spec.Options.Helm.Values.Compacted != `{"replicas":1}` {
		t.Fatalf("values are held as JSON: %+v", got.Spec.Options.Helm.Values)
	}
	// What the bundle controller renders compares equal once compacted the same way.
	next := deployment(1)
	next.ManagedFields = nil
	next.Spec.Options.CompactValues()
	next.Spec.StagedOptions.CompactValues()
	if !equality.Semantic.DeepEqual(got.Spec, next.Spec) {
		t.Fatal("a compacted rendering equals the cached deployment")
	}
	next.Spec.Options.Helm.Values = &fleet.GenericMap{Data: map[string]any{"replicas": float64(2)}}
	next.Spec.Options.CompactValues()
	if equality.Semantic.DeepEqual(got.Spec, next.Spec) {
		t.Fatal("different values compare different")
	}

	held := deployment(3) // staged options not promoted yet
	held.Spec.StagedDeploymentID = "s-1:b"
	out, _ = slimDeployment(held)
	got = out.(*fleet.BundleDeployment)
	if got.Spec.Options.Helm == got.Spec.StagedOptions.Helm || got.Spec.Options.Helm.Values.Compacted != `{"replicas":1}` ||
		got.Spec.StagedOptions.Helm.Values.Compacted != `{"replicas":3}` {
		t.Fatal("options held back by a rollout stay apart")
	}
}

func TestSlimContent(t *testing.T) {
	c := &fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: "s-1"}, Content: []byte("gzip"), SHA256Sum: "1"}
	c.Status.ReferenceCount = 3
	out, _ := slimContent(c)
	got := out.(*fleet.Content)
	if got.Content != nil || got.SHA256Sum != "1" || got.Status.ReferenceCount != 3 {
		t.Fatalf("only the manifest is dropped: %+v", got)
	}
}

// decoded is what an informer would cache: the object as the apiserver sends it.
func decoded[T any](t *testing.T, obj T) T {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSlimOwned(t *testing.T) {
	role := func(cluster string) *rbacv1.Role {
		return &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "fleet-agent-status-" + cluster, Namespace: "fleet-default",
			Labels:        map[string]string{fleet.ClusterLabel: cluster, apply.LabelHash: "abc"},
			Annotations:   map[string]string{apply.LabelApplied: "H4sI-" + cluster, "objectset.rio.cattle.io/id": "fleet-agent-identity-v2"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "fleet"}}},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"clusters/status"}, Verbs: []string{"patch"}, ResourceNames: []string{cluster}}}}
	}
	a, b := decoded(t, role("one")), decoded(t, role("two"))
	want := decoded(t, a)
	want.ManagedFields = nil
	out, _ := slimOwned(a)
	_, _ = slimOwned(b)
	if !equality.Semantic.DeepEqual(out, want) {
		t.Fatalf("the cached role differs from the stored one:\n%+v\n%+v", out, want)
	}
	same := func(what, x, y string) {
		if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
			t.Errorf("%s: one copy expected for %q and %q", what, x, y)
		}
	}
	same("namespace", a.Namespace, b.Namespace)
	same("verb", a.Rules[0].Verbs[0], b.Rules[0].Verbs[0])
	same("set ID", a.Annotations["objectset.rio.cattle.io/id"], b.Annotations["objectset.rio.cattle.io/id"])
	for k := range a.Labels {
		for l := range b.Labels {
			if k == l {
				same("label key", k, l)
			}
		}
	}

	rb := decoded(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "fleet-default"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "x"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa", Namespace: "ids"}}})
	want2 := decoded(t, rb)
	if out, _ := slimOwned(rb); !equality.Semantic.DeepEqual(out, want2) {
		t.Fatalf("the cached binding differs from the stored one:\n%+v\n%+v", out, want2)
	}

	cred := decoded(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "c-1", Namespace: "cattle-fleet-clusters-system"},
		Type: registration.CredentialSecretType, Data: map[string][]byte{registration.KeyToken: []byte("t")}})
	other := decoded(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: "fleet-default"},
		Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"password": []byte("p")}})
	if out, _ := slimOwned(cred); out.(*corev1.Secret).Data != nil || out.(*corev1.Secret).Name != "c-1" {
		t.Error("a registration credential's data is not cached")
	}
	if out, _ := slimOwned(other); string(out.(*corev1.Secret).Data["password"]) != "p" {
		t.Error("other Secrets keep their data (GitRepo credentials are read from the cache)")
	}
}

// The caches of ServiceAccounts, Roles and RoleBindings hold the manager's apply sets but nothing
// of the agent identity namespace, whose objects registration writes by name.
func TestTweaksLeaveTheIdentityNamespaceOut(t *testing.T) {
	tw := tweaks()
	for _, gvk := range []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
		rbacv1.SchemeGroupVersion.WithKind("Role"), rbacv1.SchemeGroupVersion.WithKind("RoleBinding")} {
		var lo metav1.ListOptions
		tw[gvk](&lo)
		if lo.LabelSelector != apply.LabelHash || lo.FieldSelector != "metadata.namespace!="+registration.AgentIdentityNamespace {
			t.Errorf("%s: list options %+v", gvk.Kind, lo)
		}
	}
	var lo metav1.ListOptions
	tw[rbacv1.SchemeGroupVersion.WithKind("ClusterRole")](&lo)
	if lo.LabelSelector != apply.LabelHash || lo.FieldSelector != "" {
		t.Errorf("ClusterRole: list options %+v", lo)
	}
}

// oneCopy fails unless x and y are equal and share their bytes.
func oneCopy(t *testing.T, what, x, y string) {
	t.Helper()
	if x != y || unsafe.StringData(x) != unsafe.StringData(y) {
		t.Errorf("%s: one copy expected for %q and %q", what, x, y)
	}
}

func TestSlimStatusesShareWhatObjectsRepeat(t *testing.T) {
	conds := func() []genericcondition.GenericCondition {
		return []genericcondition.GenericCondition{{Type: "Ready", Status: corev1.ConditionTrue, LastUpdateTime: "2026-11-28T05:00:00Z",
			Reason: "Done", Message: "unique to this object"}}
	}
	cluster := func(name string) *fleet.Cluster {
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "fleet-default", Labels: map[string]string{"env": "prod"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "fleet"}}}}
		c.Status.Conditions = conds()
		c.Status.Display = fleet.ClusterDisplay{ReadyBundles: "5/5", State: "Ready"}
		c.Status.AgentEnvVarsHash, c.Status.APIServerURL, c.Status.Agent.Namespace = "e3b0c442", "https://manager:6443", "cattle-fleet-system"
		return c
	}
	a, b := slimmedPair(t, slimCluster, cluster("one"), cluster("two"))
	oneCopy(t, "label value", a.Labels["env"], b.Labels["env"])
	oneCopy(t, "condition type", a.Status.Conditions[0].Type, b.Status.Conditions[0].Type)
	oneCopy(t, "condition time", a.Status.Conditions[0].LastUpdateTime, b.Status.Conditions[0].LastUpdateTime)
	oneCopy(t, "display", a.Status.Display.ReadyBundles, b.Status.Display.ReadyBundles)
	oneCopy(t, "hash", a.Status.AgentEnvVarsHash, b.Status.AgentEnvVarsHash)
	oneCopy(t, "manager URL", a.Status.APIServerURL, b.Status.APIServerURL)

	bd := func(ns string) *fleet.BundleDeployment {
		d := deployment(1)
		d.Namespace = ns
		d.Status.Conditions = conds()
		d.Status.Display = fleet.BundleDeploymentDisplay{Deployed: "Yes", Monitored: "Yes", State: "Ready"}
		d.Status.Resources = []fleet.BundleDeploymentResource{{Kind: "ConfigMap", APIVersion: "v1", Namespace: "app", Name: ns}}
		return d
	}
	x, y := slimmedPair(t, slimDeployment, bd("cluster-one"), bd("cluster-two"))
	oneCopy(t, "condition status", string(x.Status.Conditions[0].Status), string(y.Status.Conditions[0].Status))
	oneCopy(t, "condition reason", x.Status.Conditions[0].Reason, y.Status.Conditions[0].Reason)
	oneCopy(t, "state", x.Status.Display.State, y.Status.Display.State)
	oneCopy(t, "resource kind", x.Status.Resources[0].Kind, y.Status.Resources[0].Kind)
}

// slimmedPair decodes a and b as an informer would, passes both through slim, checks that a
// still writes as the apiserver stored it (managed fields aside), and returns both.
func slimmedPair[T metav1.Object](t *testing.T, slim func(any) (any, error), a, b T) (T, T) {
	t.Helper()
	a, b = decoded(t, a), decoded(t, b)
	want := decoded(t, a)
	want.SetManagedFields(nil)
	wantJSON, _ := json.Marshal(want)
	if _, err := slim(a); err != nil {
		t.Fatal(err)
	}
	if _, err := slim(b); err != nil {
		t.Fatal(err)
	}
	if gotJSON, _ := json.Marshal(a); string(gotJSON) != string(wantJSON) {
		t.Fatalf("the cached object writes differently from the stored one:\n%s\n%s", gotJSON, wantJSON)
	}
	return a, b
}
