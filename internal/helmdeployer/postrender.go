package helmdeployer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/rancher/wrangler/v3/pkg/apply"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/helmrelease"
	"github.com/fleetgo/fleet/internal/render"
)

// KeepPolicyAnnotation and its value make Helm leave a resource behind on uninstall.
const (
	KeepPolicyAnnotation = "helm.sh/resource-policy"
	KeepPolicy           = "keep"
)

// SetID is the wrangler object set of a BundleDeployment's resources: every deployed object
// carries its hash label, which is how the monitor finds what is live (and what is extra).
func SetID(bundleID string) string { return "fleet-agent-bundle-" + bundleID }

// postRenderer runs kustomize (when the bundle uses it), then stamps every object with the
// object-set label and annotation of its BundleDeployment and, with keepResources, Helm's keep
// policy. CustomResourceDefinitions get the keep policy too unless deleteCRDResources: removing
// a bundle must not take every custom resource of its CRDs with it. With the bundle's namespace
// option every object is put into that namespace, and a cluster-scoped one is refused.
type postRenderer struct {
	setID      string
	keep       bool
	deleteCRDs bool
	kustomize  *render.Kustomizer
	// namespace, when set, is forced onto every object; namespaced tells which kinds may be.
	namespace  string
	namespaced func(schema.GroupVersionKind) (bool, error)
	// ignored, on upgrades, keeps the cluster's values of fields comparePatches ignore.
	ignored *ignoredFields
}

func (p *postRenderer) Run(in *bytes.Buffer) (*bytes.Buffer, error) {
	if p.kustomize != nil {
		out, err := p.kustomize.Run(in)
		if err != nil {
			return nil, err
		}
		in = out
	}
	labels, annotations, err := apply.GetLabelsAndAnnotations(p.setID, nil)
	if err != nil {
		return nil, err
	}
	objs, err := ParseManifest(in.String())
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for _, obj := range objs {
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		for k, v := range labels {
			l[k] = v
		}
		obj.SetLabels(l)
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		for k, v := range annotations {
			a[k] = v
		}
		if p.keep || (!p.deleteCRDs && obj.GetKind() == "CustomResourceDefinition" && obj.GroupVersionKind().Group == "apiextensions.k8s.io") {
			a[KeepPolicyAnnotation] = KeepPolicy
		}
		obj.SetAnnotations(a)
		if p.namespace != "" {
			if err := p.force(obj); err != nil {
				return nil, err
			}
		}
		if p.ignored != nil {
			if err := p.ignored.keep(obj); err != nil {
				return nil, fmt.Errorf("reading %s %s for the fields comparePatches ignore: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(data)
	}
	return &out, nil
}

// force puts obj into the forced namespace, refusing a cluster-scoped object.
func (p *postRenderer) force(obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	ok, err := p.namespaced(gvk)
	if err != nil {
		return fmt.Errorf("namespace %s: %s %s: %w", p.namespace, gvk.Kind, obj.GetName(), err)
	}
	if !ok {
		return helmrelease.Permanent(fmt.Errorf("namespace %s: the bundle's namespace option puts every resource into it, but %s %s is cluster-scoped",
			p.namespace, gvk.Kind, obj.GetName()))
	}
	obj.SetNamespace(p.namespace)
	return nil
}

// ParseManifest splits a YAML stream into objects, skipping empty documents; a List's items
// are returned one by one.
func ParseManifest(manifest string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		obj := map[string]any{}
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("manifest document %d: %w", i+1, err)
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.IsList() {
			list, err := u.ToList()
			if err != nil {
				return nil, fmt.Errorf("manifest document %d: %w", i+1, err)
			}
			for j := range list.Items {
				out = append(out, &list.Items[j])
			}
			continue
		}
		out = append(out, u)
	}
}

func containsCRD(manifest string) bool {
	return strings.Contains(manifest, "kind: CustomResourceDefinition")
}
