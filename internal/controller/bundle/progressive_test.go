package bundle

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetgo/fleet/internal/rollout"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// gitRepos and helmOps answer Get from a map, as the caches do.
type gitRepos struct {
	fleetcontrollers.GitRepoCache
	m map[string]*fleet.GitRepo
}

func (c gitRepos) Get(ns, name string) (*fleet.GitRepo, error) {
	if o, ok := c.m[ns+"/"+name]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "gitrepos"}, name)
}

type helmOps struct {
	fleetcontrollers.HelmOpCache
	m map[string]*fleet.HelmOp
}

func (c helmOps) Get(ns, name string) (*fleet.HelmOp, error) {
	if o, ok := c.m[ns+"/"+name]; ok {
		return o, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "helmops"}, name)
}

func TestPolicyName(t *testing.T) {
	named := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Annotations: map[string]string{fleet.RolloutPolicyAnnotation: n}}
	}
	h := &handler{
		gitrepos: gitRepos{m: map[string]*fleet.GitRepo{"ns/shop": {ObjectMeta: named("from-repo")}}},
		helmops:  helmOps{m: map[string]*fleet.HelmOp{"ns/db": {ObjectMeta: named("from-helmop")}}},
	}
	b := func(labels, annotations map[string]string) *fleet.Bundle {
		return &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: labels, Annotations: annotations}}
	}
	cases := []struct {
		b    *fleet.Bundle
		want string
	}{
		{b(map[string]string{fleet.RepoLabel: "shop"}, nil), "from-repo"},
		{b(map[string]string{fleet.RepoLabel: "shop"}, map[string]string{fleet.RolloutPolicyAnnotation: "own"}), "own"},
		{b(map[string]string{fleet.HelmNameLabel: "db"}, nil), "from-helmop"},
		{b(map[string]string{fleet.RepoLabel: "gone"}, nil), ""},
		{b(nil, nil), ""},
	}
	for i, c := range cases {
		if got := h.policyName(c.b); got != c.want {
			t.Errorf("case %d: %q, want %q", i, got, c.want)
		}
	}
}

// A promotion marks the revision; a rollback renders the cluster's deployment again from the
// revision the Rollout kept as passed (its Content, options and targets); a hold keeps the
// cluster as it is; nothing kept or not targeted then means no rollback.
func TestPromoteRollBackHold(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "fleet-default", UID: "c1", Labels: map[string]string{"env": "prod"}}}
	ci := target.ClusterInfo{Cluster: c}
	all := []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{}}}
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet-default"},
		Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "v2"}, Targets: all}}
	v1 := b.DeepCopy()
	v1.Spec.DefaultNamespace = "v1"
	m := &target.Match{Targets: []int{0}}
	old, err := render(v1, ci, m, "s-old")
	if err != nil {
		t.Fatal(err)
	}
	desired, err := render(b, ci, m, "s-new")
	if err != nil {
		t.Fatal(err)
	}
	cur := old.DeepCopy()
	cur.Annotations = map[string]string{fleet.RolloutRevisionAnnotation: "r1", fleet.RolloutPreviousAnnotation: "{}"}
	passed := rollout.Inputs(v1, "s-old")
	pg := &progressive{revision: "r2", now: now, bundle: b, result: rollout.Result{Status: fleet.RolloutStatus{PassedRevision: passed.Revision, Passed: passed}}}

	next := pg.promote(desired, cur)
	if next.Spec.DeploymentID != desired.Spec.DeploymentID || next.Annotations[fleet.RolloutRevisionAnnotation] != "r2" ||
		next.Annotations[fleet.RolloutPromotedAnnotation] == "" || next.Annotations[fleet.RolloutPreviousAnnotation] != "" {
		t.Fatalf("promoted: %s %+v", next.Spec.DeploymentID, next.Annotations)
	}
	back := pg.rollBack(ci, desired, next)
	if back == nil || back.Spec.DeploymentID != old.Spec.DeploymentID || back.Spec.Options.DefaultNamespace != "v1" ||
		back.Labels[fleet.ContentNameLabel] != "s-old" || back.Annotations[fleet.RolloutRevisionAnnotation] != passed.Revision ||
		back.Spec.StagedDeploymentID != desired.Spec.StagedDeploymentID {
		t.Fatalf("rolled back: %+v %+v %+v", back.Spec, back.Labels, back.Annotations)
	}
	held := hold(desired, cur)
	if held.Spec.DeploymentID != old.Spec.DeploymentID || held.Spec.StagedDeploymentID != desired.Spec.StagedDeploymentID || held.Labels[fleet.ContentNameLabel] != "s-old" {
		t.Fatalf("held: %+v", held.Spec)
	}
	// The revision that passed targeted other clusters only: nothing to return this one to.
	v1.Spec.Targets = []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}}
	notHere := &progressive{bundle: b, result: rollout.Result{Status: fleet.RolloutStatus{Passed: rollout.Inputs(v1, "s-old")}}}
	if notHere.rollBack(ci, desired, next) != nil {
		t.Fatal("rolled back to a revision that did not target the cluster")
	}
	if (&progressive{bundle: b}).rollBack(ci, desired, next) != nil {
		t.Fatal("nothing kept: no rollback")
	}
	// What the Rollout kept is input (rollouts/status may be written by others than the
	// manager): a revision the namespace's rules refuse now is not returned to.
	v1.Spec.Targets = all
	var checked *fleet.Bundle
	refused := &progressive{bundle: b, result: rollout.Result{Status: fleet.RolloutStatus{Passed: rollout.Inputs(v1, "s-old")}},
		rules: func(b *fleet.Bundle) (bool, *refusal, error) {
			checked = b
			return true, &refusal{"Restricted", errors.New("serviceAccount: not allowed")}, nil
		}}
	if refused.rollBack(ci, desired, next) != nil || checked == nil || checked.Spec.DefaultNamespace != "v1" {
		t.Fatalf("a refused revision was returned to (checked %v)", checked)
	}
}
