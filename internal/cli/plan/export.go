package plan

import (
	"context"
	"io"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	clitarget "github.com/fleetgo/fleet/internal/cli/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Clusters reads what targeting reads on the manager for Bundles of namespace: its Clusters and
// ClusterGroups, its BundleNamespaceMappings, and the Clusters, groups and labels of the
// namespaces those open (listing namespaces needs that right; without mappings it is not asked).
func Clusters(ctx context.Context, api fleetcontrollers.Interface, kube kubernetes.Interface, namespace string) (clitarget.Input, error) {
	var in clitarget.Input
	mappings, err := api.BundleNamespaceMapping().List(namespace, metav1.ListOptions{})
	if err != nil {
		return in, err
	}
	namespaces := []string{namespace}
	if len(mappings.Items) > 0 {
		nss, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return in, err
		}
		in.Namespaces = map[string]map[string]string{}
		for i := range mappings.Items {
			m := &mappings.Items[i]
			in.Mappings = append(in.Mappings, m)
			sel, err := metav1.LabelSelectorAsSelector(m.NamespaceSelector)
			if err != nil || m.NamespaceSelector == nil {
				continue
			}
			for _, ns := range nss.Items {
				if ns.Name != namespace && sel.Matches(labels.Set(ns.Labels)) && in.Namespaces[ns.Name] == nil {
					in.Namespaces[ns.Name] = ns.Labels
					namespaces = append(namespaces, ns.Name)
				}
			}
		}
	}
	for _, ns := range namespaces {
		clusters, err := api.Cluster().List(ns, metav1.ListOptions{})
		if err != nil {
			return in, err
		}
		groups, err := api.ClusterGroup().List(ns, metav1.ListOptions{})
		if err != nil {
			return in, err
		}
		for i := range clusters.Items {
			in.Clusters = append(in.Clusters, &clusters.Items[i])
		}
		for i := range groups.Items {
			in.Groups = append(in.Groups, &groups.Items[i])
		}
	}
	return in, nil
}

// ExportClusters writes what planning reads (Clusters) as a YAML List that `fleet plan
// --clusters-file` reads: names, labels, annotations and template values of Clusters, labels and
// selectors of groups, mappings, and the labels of the namespaces they open; no status, no
// credentials.
func ExportClusters(ctx context.Context, w io.Writer, api fleetcontrollers.Interface, kube kubernetes.Interface, namespace string) error {
	in, err := Clusters(ctx, api, kube, namespace)
	if err != nil {
		return err
	}
	tm := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: "fleet.cattle.io/v1alpha1", Kind: kind}
	}
	var items []any
	for _, c := range in.Clusters {
		items = append(items, fleet.Cluster{TypeMeta: tm("Cluster"),
			ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: c.Labels, Annotations: c.Annotations},
			Spec:       fleet.ClusterSpec{TemplateValues: c.Spec.TemplateValues}})
	}
	for _, g := range in.Groups {
		items = append(items, fleet.ClusterGroup{TypeMeta: tm("ClusterGroup"),
			ObjectMeta: metav1.ObjectMeta{Name: g.Name, Namespace: g.Namespace, Labels: g.Labels}, Spec: fleet.ClusterGroupSpec{Selector: g.Spec.Selector}})
	}
	for _, m := range in.Mappings {
		items = append(items, fleet.BundleNamespaceMapping{TypeMeta: tm("BundleNamespaceMapping"),
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace}, BundleSelector: m.BundleSelector, NamespaceSelector: m.NamespaceSelector})
	}
	for name, l := range in.Namespaces {
		items = append(items, corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}, ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}})
	}
	data, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
