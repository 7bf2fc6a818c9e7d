package target

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestMatcherReportsEveryInvalidSelector(t *testing.T) {
	b := &fleet.Bundle{Spec: fleet.BundleSpec{Targets: []fleet.BundleTarget{
		{ClusterName: "a"},
		{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}},
	}}}
	// The first target matches cluster a, so evaluation would never reach the second; the
	// Bundle is still wrong and says so.
	if _, err := NewMatcher(b); err == nil || !strings.Contains(err.Error(), "targets[1].clusterSelector") {
		t.Fatalf("want an error naming targets[1].clusterSelector, got %v", err)
	}
}

func TestMatcherAgreesWithMatchCluster(t *testing.T) {
	b := &fleet.Bundle{Spec: fleet.BundleSpec{
		TargetCustomizationMode: "AllMatches",
		TargetRestrictions:      []fleet.BundleTargetRestriction{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}},
		Targets: []fleet.BundleTarget{
			{ClusterGroup: "eu"},
			{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
			{ClusterName: "skip", DoNotDeploy: true},
		},
	}}
	groups := []*fleet.ClusterGroup{
		{ObjectMeta: metav1.ObjectMeta{Name: "eu", Namespace: "ns"}, Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "eu", Namespace: "other"}, Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{}}},
	}
	gm, err := NewGroupMatcher(groups)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMatcher(b)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		labels map[string]string
		want   []int
	}{
		"prod-eu": {map[string]string{"env": "prod", "region": "eu"}, []int{0, 1}},
		"prod-us": {map[string]string{"env": "prod", "region": "us"}, []int{1}},
		"dev-eu":  {map[string]string{"env": "dev", "region": "eu"}, nil},
		"skip":    {map[string]string{"env": "prod"}, nil},
	}
	for name, tc := range cases {
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: tc.labels}}
		cg := gm.Groups(c)
		for _, g := range cg {
			if g.Namespace != "ns" {
				t.Fatalf("%s: a group of another namespace matched", name)
			}
		}
		ci := ClusterInfo{Cluster: c, Groups: cg}
		got := m.Match(ci)
		want, err := MatchCluster(b, ci)
		if err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (tc.want == nil) || (want == nil) != (tc.want == nil) {
			t.Fatalf("%s: matched %v, MatchCluster %v, want %v", name, got, want, tc.want)
		}
		if got != nil && (len(got.Targets) != len(tc.want) || len(want.Targets) != len(tc.want)) {
			t.Fatalf("%s: targets %v and %v, want %v", name, got.Targets, want.Targets, tc.want)
		}
		for i := range tc.want {
			if got != nil && (got.Targets[i] != tc.want[i] || want.Targets[i] != tc.want[i]) {
				t.Fatalf("%s: targets %v and %v, want %v", name, got.Targets, want.Targets, tc.want)
			}
		}
	}
}

// Clusters matching the same targets share one Match; other targets get another, and a
// MatchCluster result is the caller's own.
func TestMatcherSharesMatches(t *testing.T) {
	b := &fleet.Bundle{Spec: fleet.BundleSpec{
		TargetCustomizationMode: "AllMatches",
		Targets: []fleet.BundleTarget{
			{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
			{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}},
		},
	}}
	m, err := NewMatcher(b)
	if err != nil {
		t.Fatal(err)
	}
	cluster := func(name string, labels map[string]string) ClusterInfo {
		return ClusterInfo{Cluster: &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels}}}
	}
	a := m.Match(cluster("a", map[string]string{"env": "prod"}))
	b2 := m.Match(cluster("b", map[string]string{"env": "prod"}))
	both := m.Match(cluster("c", map[string]string{"env": "prod", "region": "eu"}))
	eu := m.Match(cluster("d", map[string]string{"region": "eu"}))
	if a == nil || a != b2 {
		t.Fatalf("same targets, different matches: %p %p", a, b2)
	}
	if both == a || eu == a || both == eu {
		t.Fatal("different targets share a match")
	}
	if !slices.Equal(a.Targets, []int{0}) || !slices.Equal(both.Targets, []int{0, 1}) || !slices.Equal(eu.Targets, []int{1}) {
		t.Fatalf("targets: %v %v %v", a.Targets, both.Targets, eu.Targets)
	}
	b.Spec.Targets[0].Helm = &fleet.HelmOptions{ReleaseName: "r"}
	mc, err := MatchCluster(b, cluster("a", map[string]string{"env": "prod"}))
	if err != nil || mc == nil || mc.Options.Helm == nil || mc.Options.Helm.ReleaseName != "r" {
		t.Fatalf("MatchCluster: %+v %v", mc, err)
	}
	if a.Options.Helm != nil {
		t.Fatal("MatchCluster changed a shared match")
	}
}
