package plan

import (
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// ExportClusters writes what planning reads of the namespace's Clusters and ClusterGroups as a
// YAML List (`fleet plan --clusters-file` reads it): names, labels, annotations and template
// values of Clusters, labels and selectors of groups; no status, no credentials.
func ExportClusters(w io.Writer, api fleetcontrollers.Interface, namespace string) error {
	clusters, err := api.Cluster().List(namespace, metav1.ListOptions{})
	if err != nil {
		return err
	}
	groups, err := api.ClusterGroup().List(namespace, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var items []any
	for _, c := range clusters.Items {
		items = append(items, fleet.Cluster{TypeMeta: metav1.TypeMeta{APIVersion: "fleet.cattle.io/v1alpha1", Kind: "Cluster"},
			ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: c.Labels, Annotations: c.Annotations},
			Spec:       fleet.ClusterSpec{TemplateValues: c.Spec.TemplateValues}})
	}
	for _, g := range groups.Items {
		items = append(items, fleet.ClusterGroup{TypeMeta: metav1.TypeMeta{APIVersion: "fleet.cattle.io/v1alpha1", Kind: "ClusterGroup"},
			ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: g.Namespace, Labels: g.Labels},
			Spec:       fleet.ClusterGroupSpec{Selector: g.Spec.Selector}})
	}
	data, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
