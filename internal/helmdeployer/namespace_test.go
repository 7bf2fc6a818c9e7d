package helmdeployer

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestCheckNamespace(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "a"}}
	ns := func(l map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps", Labels: l}}
	}
	for _, tc := range []struct {
		name string
		ns   *corev1.Namespace
		sel  *metav1.LabelSelector
		err  string
	}{
		{name: "matching labels", ns: ns(map[string]string{"tenant": "a", "x": "y"}), sel: sel},
		{name: "other labels", ns: ns(map[string]string{"tenant": "b"}), sel: sel, err: "namespace apps is not allowed: its labels do not match allowedTargetNamespaceSelector \"tenant=a\""},
		{name: "no labels", ns: ns(nil), sel: sel, err: "not allowed"},
		{name: "absent", sel: sel, err: "namespace apps does not exist"},
		{name: "invalid selector", ns: ns(nil), sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Sometimes"}}}, err: "allowedTargetNamespaceSelector"},
	} {
		err := checkNamespace("apps", tc.ns, tc.sel)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.err)
		}
	}
}
