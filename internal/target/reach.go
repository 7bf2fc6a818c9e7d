package target

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Reach is the namespaces whose Clusters Bundle b may target: its own first, then each namespace
// a BundleNamespaceMapping of b's namespace opens to it (its bundleSelector matches b, its
// namespaceSelector the namespace), once each. mappings may hold other namespaces' too: they
// do not count. namespaces lists the namespaces a selector matches. A mapping of b's namespace
// whose selector does not parse is a targeting error naming it: where it would send b cannot be
// known, so b is not targeted anywhere rather than targeted short (the manager keeps what is
// deployed; `fleet plan` reports the bundle). One rule for the manager and `fleet plan`.
func Reach(b *fleet.Bundle, mappings []*fleet.BundleNamespaceMapping, namespaces func(labels.Selector) ([]string, error)) ([]string, error) {
	out := []string{b.Namespace}
	seen := map[string]bool{b.Namespace: true}
	for _, m := range mappings {
		if m.Namespace != b.Namespace || m.BundleSelector == nil || m.NamespaceSelector == nil {
			continue
		}
		bsel, err := metav1.LabelSelectorAsSelector(m.BundleSelector)
		if err != nil {
			return nil, fmt.Errorf("targeting error: bundlenamespacemapping %s: bundleSelector: %w", m.Name, err)
		}
		if !bsel.Matches(labels.Set(b.Labels)) {
			continue
		}
		nsel, err := metav1.LabelSelectorAsSelector(m.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("targeting error: bundlenamespacemapping %s: namespaceSelector: %w", m.Name, err)
		}
		nss, err := namespaces(nsel)
		if err != nil {
			return nil, err
		}
		for _, ns := range nss {
			if !seen[ns] {
				seen[ns] = true
				out = append(out, ns)
			}
		}
	}
	return out, nil
}
