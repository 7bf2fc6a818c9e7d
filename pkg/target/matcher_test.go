package target

import (
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
