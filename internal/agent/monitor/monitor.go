package monitor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/rancher/wrangler/v3/pkg/apply"
	"github.com/rancher/wrangler/v3/pkg/objectset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/fleetgo/fleet/internal/helmdeployer"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// cacheSyncTimeout bounds the wait for a new kind's watch to list what exists.
const cacheSyncTimeout = 30 * time.Second

// Monitor checks deployed bundles against their release manifests. It watches every kind it
// has seen deployed (only objects carrying an object-set label, so only what agents deployed)
// and calls OnChange with the BundleDeployment name when one of its objects changes.
type Monitor struct {
	apply     apply.Apply
	mapper    meta.RESTMapper
	informers *informers

	mu     sync.RWMutex
	byHash map[string]string
}

// New returns a Monitor for the cluster of cfg. disc should be a cached discovery client;
// onChange is called (from informer goroutines) with the name of a BundleDeployment whose
// deployed objects changed.
func New(ctx context.Context, cfg *rest.Config, disc discovery.DiscoveryInterface, mapper meta.RESTMapper, onChange func(bundleID string)) (*Monitor, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	m := &Monitor{apply: apply.New(disc, apply.NewClientFactory(cfg)), mapper: mapper, byHash: map[string]string{}}
	m.informers = &informers{
		ctx: ctx,
		factory: dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
			o.LabelSelector = apply.LabelHash
		}),
		started: map[schema.GroupVersionResource]cache.SharedIndexInformer{},
		onChange: func(hash string) {
			m.mu.RLock()
			id, ok := m.byHash[hash]
			m.mu.RUnlock()
			if ok {
				onChange(id)
			}
		},
	}
	return m, nil
}

// Forget stops reporting changes for a BundleDeployment (it was deleted).
func (m *Monitor) Forget(bundleID string) {
	labels, _, _ := apply.GetLabelsAndAnnotations(helmdeployer.SetID(bundleID), nil)
	m.mu.Lock()
	delete(m.byHash, labels[apply.LabelHash])
	m.mu.Unlock()
}

// Check compares a release's manifest with what is live. With fresh the live objects are
// listed from the apiserver (right after a deploy, before watches catch up); otherwise they
// come from the watch caches.
func (m *Monitor) Check(ctx context.Context, bundleID string, rel *helmdeployer.Release, opts *fleet.BundleDeploymentOptions, fresh bool) (Result, error) {
	setID := helmdeployer.SetID(bundleID)
	labels, _, err := apply.GetLabelsAndAnnotations(setID, nil)
	if err != nil {
		return Result{}, err
	}
	m.mu.Lock()
	m.byHash[labels[apply.LabelHash]] = bundleID
	m.mu.Unlock()

	objs, err := helmdeployer.ParseManifest(rel.Manifest)
	if err != nil {
		return Result{}, err
	}
	desired := make([]runtime.Object, 0, len(objs))
	for _, o := range objs {
		normalizeDesired(o)
		// Helm's manifest leaves the release namespace out; the live objects have it.
		if o.GetNamespace() == "" && m.namespaced(o.GroupVersionKind()) {
			o.SetNamespace(rel.Namespace)
		}
		desired = append(desired, o)
	}
	a := m.apply.WithContext(ctx).WithSetID(setID).WithDefaultNamespace(rel.Namespace)
	if fresh {
		a = a.WithDynamicLookup()
	} else {
		a = a.WithCacheTypeFactory(m.informers)
	}
	if opts.Diff != nil {
		for _, cp := range opts.Diff.ComparePatches {
			gvk := schema.FromAPIVersionAndKind(cp.APIVersion, cp.Kind)
			for _, p := range comparePatchOps(cp) {
				a = a.WithDiffPatch(gvk, cp.Namespace, cp.Name, p)
			}
		}
	}
	plan, err := a.DryRun(desired...)
	if err != nil {
		return Result{}, fmt.Errorf("comparing release %s with the cluster: %w", rel, err)
	}
	if opts.Diff != nil {
		dropIgnored(&plan, opts.Diff.ComparePatches)
	}
	if fresh {
		// A fresh check follows a deploy: watch the kinds deployed, so later changes are noticed.
		m.watch(desired)
	}
	return summarize(desired, plan, opts.IgnoreOptions), nil
}

// watch starts (once per kind) the watches of the kinds among objs; it does not wait for them
// to sync (the checks that use them do).
func (m *Monitor) watch(objs []runtime.Object) {
	seen := map[schema.GroupVersionKind]bool{}
	for _, o := range objs {
		gvk := o.GetObjectKind().GroupVersionKind()
		if seen[gvk] {
			continue
		}
		seen[gvk] = true
		if gvr, ok := m.gvr(gvk); ok {
			m.informers.start(gvr)
		}
	}
}

// namespaced reports whether a kind is namespaced; unknown kinds count as namespaced.
func (m *Monitor) namespaced(gvk schema.GroupVersionKind) bool {
	mapping, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return true
	}
	return mapping.Scope.Name() == meta.RESTScopeNameNamespace
}

// gvr resolves a kind through the shared (cached) REST mapper.
func (m *Monitor) gvr(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	mapping, err := m.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false
	}
	return mapping.Resource, true
}

// ignoreOp in a comparePatch's operations leaves the objects it names out of drift detection.
const ignoreOp = "ignore"

// dropIgnored removes from plan the objects a comparePatch with an "ignore" operation names
// (by apiVersion and kind, and namespace and name where given): changed, missing or extra,
// they are not drift.
func dropIgnored(plan *apply.Plan, patches []fleet.ComparePatch) {
	var ignored []fleet.ComparePatch
	for _, cp := range patches {
		for _, op := range cp.Operations {
			if op.Op == ignoreOp {
				ignored = append(ignored, cp)
				break
			}
		}
	}
	if len(ignored) == 0 {
		return
	}
	matches := func(gvk schema.GroupVersionKind, k objectset.ObjectKey) bool {
		for _, cp := range ignored {
			if schema.FromAPIVersionAndKind(cp.APIVersion, cp.Kind) == gvk &&
				(cp.Namespace == "" || cp.Namespace == k.Namespace) && (cp.Name == "" || cp.Name == k.Name) {
				return true
			}
		}
		return false
	}
	for _, byGVK := range []objectset.ObjectKeyByGVK{plan.Create, plan.Delete} {
		for gvk, keys := range byGVK {
			kept := keys[:0]
			for _, k := range keys {
				if !matches(gvk, k) {
					kept = append(kept, k)
				}
			}
			byGVK[gvk] = kept
		}
	}
	for gvk, byKey := range plan.Update {
		for k := range byKey {
			if matches(gvk, k) {
				delete(byKey, k)
			}
		}
	}
}

// comparePatchOps turns a comparePatch into JSON patches wrangler applies to both sides before
// comparing, one per operation so a path missing on one object does not void the others.
func comparePatchOps(cp fleet.ComparePatch) [][]byte {
	var out [][]byte
	for _, op := range cp.Operations {
		if op.Op == ignoreOp {
			continue // the whole object is left out of the comparison (dropIgnored)
		}
		var value any = op.Value
		var decoded any
		if op.Value != "" && json.Unmarshal([]byte(op.Value), &decoded) == nil {
			value = decoded
		}
		entry := map[string]any{"op": op.Op, "path": op.Path}
		if op.Op != "remove" {
			entry["value"] = value
		}
		data, _ := json.Marshal([]any{entry})
		out = append(out, data)
	}
	for _, p := range cp.JSONPointers {
		data, _ := json.Marshal([]any{map[string]any{"op": "remove", "path": p}})
		out = append(out, data)
	}
	return out
}

// normalizeDesired drops from a desired object what the cluster owns: status, and CA bundles
// that webhook and CRD conversion setups inject after install.
func normalizeDesired(u *unstructured.Unstructured) {
	unstructured.RemoveNestedField(u.Object, "status")
	switch u.GetKind() {
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		hooks, found, _ := unstructured.NestedSlice(u.Object, "webhooks")
		if found {
			for _, h := range hooks {
				if hm, ok := h.(map[string]any); ok {
					unstructured.RemoveNestedField(hm, "clientConfig", "caBundle")
				}
			}
			_ = unstructured.SetNestedSlice(u.Object, hooks, "webhooks")
		}
	case "CustomResourceDefinition":
		unstructured.RemoveNestedField(u.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
	case "APIService":
		unstructured.RemoveNestedField(u.Object, "spec", "caBundle")
	case "Secret":
		secretStringData(u)
	}
}

// secretStringData moves a desired Secret's stringData into its data, as the apiserver does
// when it stores one (stringData is write-only: the live Secret never shows it).
func secretStringData(u *unstructured.Unstructured) {
	if u.GroupVersionKind().Group != "" {
		return
	}
	str, found, _ := unstructured.NestedStringMap(u.Object, "stringData")
	if !found {
		return
	}
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	if data == nil {
		data = map[string]string{}
	}
	for k, v := range str {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	unstructured.RemoveNestedField(u.Object, "stringData")
	_ = unstructured.SetNestedStringMap(u.Object, data, "data")
}
