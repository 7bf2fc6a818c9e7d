package helmdeployer

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ignoredFields keeps, on an upgrade, the cluster's value of each field comparePatches ignore
// (jsonPointers and remove operations) wherever the chart did not change it since the release's
// last revision. As on Fleet, a forced redeploy then leaves what an autoscaler or an operator
// set there; a value the chart itself changes is deployed.
type ignoredFields struct {
	patches []fleet.ComparePatch
	// previous are the objects of the release's last revision, by objectKey.
	previous map[string]*unstructured.Unstructured
	// live reads an object from the cluster (nil when it does not exist).
	live func(obj *unstructured.Unstructured) (*unstructured.Unstructured, error)
	// namespace is the release's, where a manifest leaving it out puts an object.
	namespace string
	// before is what the chart rendered for each ignored field at the last revision (from the
	// ledger; nil for a release recorded before it kept them: the last manifest stands in);
	// rendered is what it renders now. Keys are fieldKey's.
	before, rendered map[string]json.RawMessage
}

// fieldKey names an ignored field of an object.
func fieldKey(obj *unstructured.Unstructured, path []string) string {
	return objectKey(obj) + "#" + strings.Join(path, "/")
}

// renderedJSON is what keep saw the chart render, for the ledger.
func (f *ignoredFields) renderedJSON() string {
	data, err := json.Marshal(f.rendered)
	if err != nil {
		return ""
	}
	return string(data)
}

// newIgnoredFields is nil when no comparePatch ignores a field.
func newIgnoredFields(patches []fleet.ComparePatch, lastManifest, lastRendered, namespace string, live func(*unstructured.Unstructured) (*unstructured.Unstructured, error)) (*ignoredFields, error) {
	var withPaths []fleet.ComparePatch
	for _, cp := range patches {
		if len(ignoredPaths(cp)) > 0 {
			withPaths = append(withPaths, cp)
		}
	}
	if len(withPaths) == 0 {
		return nil, nil
	}
	objs, err := ParseManifest(lastManifest)
	if err != nil {
		return nil, err
	}
	f := &ignoredFields{patches: withPaths, previous: map[string]*unstructured.Unstructured{}, live: live, namespace: namespace,
		rendered: map[string]json.RawMessage{}}
	if lastRendered != "" && json.Unmarshal([]byte(lastRendered), &f.before) != nil {
		f.before = nil
	}
	for _, o := range objs {
		f.previous[objectKey(o)] = o
	}
	return f, nil
}

func objectKey(o *unstructured.Unstructured) string {
	return o.GetAPIVersion() + "|" + o.GetKind() + "|" + o.GetNamespace() + "|" + o.GetName()
}

// ignoredPaths are the fields a comparePatch leaves out of drift, as pointer tokens.
func ignoredPaths(cp fleet.ComparePatch) [][]string {
	var out [][]string
	add := func(p string) {
		if tokens, ok := pointerTokens(p); ok {
			out = append(out, tokens)
		}
	}
	for _, p := range cp.JSONPointers {
		add(p)
	}
	for _, op := range cp.Operations {
		if op.Op == "remove" {
			add(op.Path)
		}
	}
	return out
}

// pointerTokens splits an RFC 6901 pointer; the empty pointer (the whole object) is refused.
func pointerTokens(p string) ([]string, bool) {
	if !strings.HasPrefix(p, "/") || len(p) < 2 {
		return nil, false
	}
	tokens := strings.Split(p[1:], "/")
	for i, t := range tokens {
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
	}
	return tokens, true
}

// keep sets obj's ignored fields to the cluster's values where the chart left them as they were.
func (f *ignoredFields) keep(obj *unstructured.Unstructured) error {
	var paths [][]string
	ns := obj.GetNamespace()
	if ns == "" {
		ns = f.namespace
	}
	for _, cp := range f.patches {
		if cp.Kind == obj.GetKind() && (cp.APIVersion == "" || cp.APIVersion == obj.GetAPIVersion()) &&
			(cp.Name == "" || cp.Name == obj.GetName()) && (cp.Namespace == "" || cp.Namespace == ns) {
			paths = append(paths, ignoredPaths(cp)...)
		}
	}
	prev := f.previous[objectKey(obj)]
	if len(paths) == 0 || prev == nil {
		return nil
	}
	var live *unstructured.Unstructured
	for _, path := range paths {
		want, ok := lookup(obj.Object, path)
		if !ok {
			continue
		}
		wantJSON, err := json.Marshal(want)
		if err != nil {
			continue
		}
		key := fieldKey(obj, path)
		f.rendered[key] = wantJSON
		if !f.unchanged(prev, key, path, wantJSON) {
			continue // the chart changed it: deployed as rendered
		}
		if live == nil {
			var err error
			if live, err = f.live(obj); err != nil || live == nil {
				return err
			}
		}
		if v, ok := lookup(live.Object, path); ok {
			assign(obj.Object, path, v)
		}
	}
	return nil
}

// unchanged says the chart rendered the field (key, at path) as want at the last revision too:
// by the ledger's record, else by the last manifest (which then still holds what the chart
// rendered: no field was kept before the record existed).
func (f *ignoredFields) unchanged(prev *unstructured.Unstructured, key string, path []string, want []byte) bool {
	if f.before != nil {
		was, ok := f.before[key]
		return ok && bytes.Equal(was, want)
	}
	was, ok := lookup(prev.Object, path)
	if !ok {
		return false
	}
	wasJSON, err := json.Marshal(was)
	return err == nil && bytes.Equal(wasJSON, want)
}

// lookup is the value at path in a decoded JSON document.
func lookup(doc any, path []string) (any, bool) {
	for _, t := range path {
		switch node := doc.(type) {
		case map[string]any:
			v, ok := node[t]
			if !ok {
				return nil, false
			}
			doc = v
		case []any:
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(node) {
				return nil, false
			}
			doc = node[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

// assign replaces the value at path, which lookup found, with v.
func assign(doc any, path []string, v any) {
	parent, _ := lookup(doc, path[:len(path)-1])
	last := path[len(path)-1]
	switch node := parent.(type) {
	case map[string]any:
		node[last] = v
	case []any:
		if i, err := strconv.Atoi(last); err == nil && i >= 0 && i < len(node) {
			node[i] = v
		}
	}
}

// ignoredFields is the keeper of the fields comparePatches ignore for an upgrade of last (nil
// for an install, or when none are ignored); it reads the cluster as the bundle's ServiceAccount
// sa, so nothing the bundle could not read itself goes into its release.
func (d *Deployer) ignoredFields(ctx context.Context, last *release.Release, opts *fleet.BundleDeploymentOptions, ns, sa string) (*ignoredFields, error) {
	if last == nil || opts.Diff == nil || len(opts.Diff.ComparePatches) == 0 {
		return nil, nil
	}
	dyn, err := dynamic.NewForConfig(d.impersonating(sa))
	if err != nil {
		return nil, err
	}
	lastRendered := ""
	if e, err := d.ledgerEntry(ctx, ns, last.Name); err != nil {
		return nil, err
	} else if e != nil && e.Version == last.Version {
		lastRendered = e.IgnoredRendered
	}
	return newIgnoredFields(opts.Diff.ComparePatches, last.Manifest, lastRendered, ns, d.liveReader(ctx, dyn, ns))
}

// liveReader reads objects as dyn's identity (the bundle's), in defaultNS when the manifest
// leaves a namespaced object's namespace out.
func (d *Deployer) liveReader(ctx context.Context, dyn dynamic.Interface, defaultNS string) func(*unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return func(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		if err := d.disc.init(); err != nil {
			return nil, err
		}
		gvk := obj.GroupVersionKind()
		m, err := d.disc.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, nil // a kind the cluster does not serve yet has no live value
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if namespaced, _ := d.disc.namespaced(gvk); namespaced {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = defaultNS
			}
			r = dyn.Resource(m.Resource).Namespace(ns)
		}
		live, err := r.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return live, err
	}
}
