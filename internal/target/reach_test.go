package target

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestReach(t *testing.T) {
	nsLabels := map[string]map[string]string{"team-b": {"team": "b"}, "team-c": {"team": "c"}, "home": {"team": "b"}}
	namespaces := func(sel labels.Selector) ([]string, error) {
		var out []string
		for _, n := range []string{"home", "team-b", "team-c"} {
			if sel.Matches(labels.Set(nsLabels[n])) {
				out = append(out, n)
			}
		}
		return out, nil
	}
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	mapping := func(ns, name string, b, n *metav1.LabelSelector) *fleet.BundleNamespaceMapping {
		return &fleet.BundleNamespaceMapping{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, BundleSelector: b, NamespaceSelector: n}
	}
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: "home", Name: "app", Labels: map[string]string{"app": "x"}}}
	got, err := Reach(b, []*fleet.BundleNamespaceMapping{
		mapping("home", "to-b", sel("app", "x"), sel("team", "b")),
		mapping("home", "other-bundles", sel("app", "y"), sel("team", "c")),
		mapping("elsewhere", "not-ours", sel("app", "x"), sel("team", "c")),
	}, namespaces)
	if err != nil || strings.Join(got, ",") != "home,team-b" {
		t.Errorf("Reach = %v, %v; want its own namespace, then team-b once", got, err)
	}
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}}
	for _, m := range []*fleet.BundleNamespaceMapping{mapping("home", "bad-ns", sel("app", "x"), bad), mapping("home", "bad-bundle", bad, sel("team", "c"))} {
		if _, err := Reach(b, []*fleet.BundleNamespaceMapping{m}, namespaces); err == nil || !strings.HasPrefix(err.Error(), "targeting error: bundlenamespacemapping "+m.Name) {
			t.Errorf("mapping %s: %v, want a targeting error naming it", m.Name, err)
		}
	}
}
