package bundle

import (
	"encoding/json"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetgo/fleet/internal/rollout"
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

// A promotion keeps what the cluster ran when that had passed, a rollback writes it back, and a
// hold keeps the cluster as it is.
func TestPromoteRollBackHold(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	desired := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleet.ContentNameLabel: "s-new"}}}
	desired.Spec.DeploymentID, desired.Spec.Options.DefaultNamespace = "s-new:2", "v2"
	cur := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleet.ContentNameLabel: "s-old"},
		Annotations: map[string]string{fleet.RolloutRevisionAnnotation: "r1"}}}
	cur.Spec.DeploymentID, cur.Spec.Options.DefaultNamespace = "s-old:1", "v1"
	pg := &progressive{revision: "r2", now: now, result: rollout.Result{Status: fleet.RolloutStatus{PassedRevision: "r1"}}}

	next := pg.promote(desired, cur)
	if next.Spec.DeploymentID != "s-new:2" || next.Annotations[fleet.RolloutRevisionAnnotation] != "r2" ||
		next.Labels[fleet.RolloutPreviousContentLabel] != "s-old" {
		t.Fatalf("promoted: %+v %+v", next.Annotations, next.Labels)
	}
	var snap fleet.RolloutSnapshot
	if err := json.Unmarshal([]byte(next.Annotations[fleet.RolloutPreviousAnnotation]), &snap); err != nil ||
		snap.DeploymentID != "s-old:1" || snap.Options.DefaultNamespace != "v1" || snap.Revision != "r1" {
		t.Fatalf("snapshot %+v: %v", snap, err)
	}
	back := rollBack(desired, next)
	if back.Spec.DeploymentID != "s-old:1" || back.Spec.Options.DefaultNamespace != "v1" || back.Labels[fleet.ContentNameLabel] != "s-old" ||
		back.Annotations[fleet.RolloutRevisionAnnotation] != "r1" {
		t.Fatalf("rolled back: %s %+v %+v", back.Spec.DeploymentID, back.Labels, back.Annotations)
	}
	// A cluster on a revision that never passed keeps its older snapshot when promoted again.
	pg3 := &progressive{revision: "r3", now: now, result: rollout.Result{Status: fleet.RolloutStatus{PassedRevision: "r1"}}}
	again := pg3.promote(desired, next)
	if again.Annotations[fleet.RolloutPreviousAnnotation] != next.Annotations[fleet.RolloutPreviousAnnotation] {
		t.Fatal("a revision that did not pass became the one to return to")
	}
	held := hold(desired, cur)
	if held.Spec.DeploymentID != "s-old:1" || held.Spec.StagedDeploymentID != desired.Spec.StagedDeploymentID || held.Labels[fleet.ContentNameLabel] != "s-old" {
		t.Fatalf("held: %+v", held.Spec)
	}
	if rollBack(desired, cur) != nil {
		t.Fatal("nothing to return to: no rollback")
	}
}
