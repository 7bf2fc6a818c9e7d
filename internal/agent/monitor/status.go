// Package monitor checks what a BundleDeployment deployed in the agent's cluster: readiness of
// every resource and drift from the release's manifest (missing, extra and modified objects).
// The agent's deployer calls it after each deploy and whenever a deployed object changes.
//
// This file holds the pure part: normalizing plans and summarizing objects into status.
package monitor

import (
	"encoding/json"
	"sort"
	"strings"

	"github.com/rancher/wrangler/v3/pkg/apply"
	"github.com/rancher/wrangler/v3/pkg/objectset"
	wsummary "github.com/rancher/wrangler/v3/pkg/summary"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Result is what the monitor found, in the shape of BundleDeployment status fields.
type Result struct {
	Ready       bool
	NonReady    []fleet.NonReadyStatus
	NonModified bool
	Modified    []fleet.ModifiedStatus
	// Incomplete is true when either list was cut at summary.MaxNonReady.
	Incomplete bool
	Resources  []fleet.BundleDeploymentResource
	Counts     fleet.ResourceCounts
}

// Apply copies the result into a status.
func (r Result) Apply(s *fleet.BundleDeploymentStatus) {
	s.Ready, s.NonReadyStatus = r.Ready, r.NonReady
	s.NonModified, s.ModifiedStatus = r.NonModified, r.Modified
	s.IncompleteState = r.Incomplete
	s.Resources = r.Resources
	counts := r.Counts
	s.ResourceCounts = &counts
}

// summarize turns a dry-run plan of the desired objects against the live ones into a Result.
// live are the existing objects of the set; ignore drops conditions before readiness is judged.
func summarize(desired []runtime.Object, plan apply.Plan, ignore *fleet.IgnoreOptions) Result {
	r := Result{}
	patched := r.addDrift(plan)
	liveByKey := map[string]*unstructured.Unstructured{}
	for _, o := range plan.Objects {
		if u, ok := o.(*unstructured.Unstructured); ok {
			liveByKey[key(u.GroupVersionKind(), u.GetNamespace(), u.GetName())] = u
		}
	}
	for _, o := range desired {
		if u, ok := o.(*unstructured.Unstructured); ok {
			k := key(u.GroupVersionKind(), u.GetNamespace(), u.GetName())
			r.addDesired(u, liveByKey[k], patched[k], ignore)
		}
	}
	r.finish()
	return r
}

// addDrift records what the dry run would create (missing), delete (orphaned) or patch
// (modified), and returns the keys of the patched objects.
func (r *Result) addDrift(plan apply.Plan) map[string]bool {
	for gvk, keys := range plan.Create {
		for _, k := range keys {
			r.Modified = append(r.Modified, modified(gvk, k, func(m *fleet.ModifiedStatus) { m.Create = true }))
			r.Counts.Missing++
		}
	}
	for gvk, keys := range plan.Delete {
		for _, k := range keys {
			r.Modified = append(r.Modified, modified(gvk, k, func(m *fleet.ModifiedStatus) { m.Delete = true }))
			r.Counts.Orphaned++
		}
	}
	patched := map[string]bool{}
	for gvk, byKey := range plan.Update {
		for k, patch := range byKey {
			p := NormalizePatch(patch)
			if p == "" {
				continue
			}
			if gvk.Group == "" && gvk.Kind == "Secret" {
				p = redactSecretPatch(p)
			}
			patched[key(gvk, k.Namespace, k.Name)] = true
			r.Modified = append(r.Modified, modified(gvk, k, func(m *fleet.ModifiedStatus) { m.Exist, m.Patch = true, p }))
		}
	}
	return patched
}

// addDesired records one desired object: as a resource, and by the readiness of its live copy
// (none: missing, counted by addDrift).
func (r *Result) addDesired(u, live *unstructured.Unstructured, patched bool, ignore *fleet.IgnoreOptions) {
	gvk := u.GroupVersionKind()
	r.Counts.DesiredReady++
	res := fleet.BundleDeploymentResource{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: u.GetNamespace(), Name: u.GetName()}
	if live == nil {
		r.Resources = append(r.Resources, res)
		return
	}
	res.CreatedAt = live.GetCreationTimestamp()
	r.Resources = append(r.Resources, res)
	s := Readiness(live, ignore)
	switch {
	case !s.IsReady():
		r.Counts.NotReady++
		r.NonReady = append(r.NonReady, fleet.NonReadyStatus{UID: string(live.GetUID()), Kind: gvk.Kind,
			APIVersion: gvk.GroupVersion().String(), Namespace: live.GetNamespace(), Name: live.GetName(),
			Summary: fleet.Summary{State: s.State, Error: s.Error, Transitioning: s.Transitioning, Message: s.Message}})
	case patched:
		r.Counts.Modified++
	default:
		r.Counts.Ready++
	}
}

// finish sorts the lists, decides Ready and NonModified, and cuts the lists to what a status
// carries.
func (r *Result) finish() {
	sortModified(r.Modified)
	sort.Slice(r.NonReady, func(i, j int) bool { return nrKey(r.NonReady[i]) < nrKey(r.NonReady[j]) })
	sort.Slice(r.Resources, func(i, j int) bool {
		a, b := r.Resources[i], r.Resources[j]
		return a.Kind+"/"+a.Namespace+"/"+a.Name < b.Kind+"/"+b.Namespace+"/"+b.Name
	})
	// Missing objects are drift (Modified), not unreadiness, as in Fleet.
	r.Ready = len(r.NonReady) == 0
	r.NonModified = len(r.Modified) == 0
	if len(r.NonReady) > summary.MaxNonReady {
		r.NonReady, r.Incomplete = r.NonReady[:summary.MaxNonReady], true
	}
	if len(r.Modified) > summary.MaxNonReady {
		r.Modified, r.Incomplete = r.Modified[:summary.MaxNonReady], true
	}
}

// Readiness summarizes one live object with wrangler's per-kind summarizers (Deployments,
// StatefulSets, DaemonSets, Jobs, Pods, PVCs, LoadBalancer Services, CRDs, APIServices and any
// object with standard conditions), after dropping the conditions ignore names.
func Readiness(obj *unstructured.Unstructured, ignore *fleet.IgnoreOptions) wsummary.Summary {
	if ignore != nil && len(ignore.Conditions) > 0 {
		obj = obj.DeepCopy()
		conds, found, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		if found {
			kept := conds[:0]
			for _, c := range conds {
				cm, _ := c.(map[string]any)
				if !ignored(cm, ignore.Conditions) {
					kept = append(kept, c)
				}
			}
			_ = unstructured.SetNestedSlice(obj.Object, kept, "status", "conditions")
		}
	}
	return wsummary.Summarize(obj)
}

// ignored reports whether a condition matches one of the ignore rules: every key of a rule
// equal to the condition's field of that name.
func ignored(cond map[string]any, rules []map[string]string) bool {
	for _, rule := range rules {
		if len(rule) == 0 {
			continue
		}
		match := true
		for k, v := range rule {
			if s, _ := cond[k].(string); s != v {
				match = false
				break
			}
		}
		if match {
			return true
		}
	}
	return false
}

// redactSecretPatch hides the values of a Secret's drift: the status goes to the manager,
// which must never hold a Secret's content (a sealed one least of all). The keys that
// drifted stay named.
func redactSecretPatch(patch string) string {
	data := map[string]any{}
	if err := json.Unmarshal([]byte(patch), &data); err != nil {
		return `{"data":"(redacted)"}`
	}
	for _, field := range []string{"data", "stringData"} {
		if m, ok := data[field].(map[string]any); ok {
			for k := range m {
				m[k] = "(redacted)"
			}
		} else if _, ok := data[field]; ok {
			data[field] = "(redacted)"
		}
	}
	out, _ := json.Marshal(data)
	return string(out)
}

// NormalizePatch removes from a dry-run patch what is not drift: wrangler's own object-set
// annotations (the "applied" record it adds to the desired side), status, strategic-merge
// directives that only order or retain (as Fleet, which counts a patch of nothing else as no
// drift: a chart setting a Deployment's strategy.type alone yields $retainKeys), and empty
// leftovers. It returns "" when nothing remains.
func NormalizePatch(patch string) string {
	data := map[string]any{}
	if err := json.Unmarshal([]byte(patch), &data); err != nil {
		return patch
	}
	dropDirectives(data)
	delete(data, "status")
	delete(data, "kind")
	delete(data, "apiVersion")
	if md, ok := data["metadata"].(map[string]any); ok {
		if ann, ok := md["annotations"].(map[string]any); ok {
			for k := range ann {
				if strings.HasPrefix(k, apply.LabelPrefix) {
					delete(ann, k)
				}
			}
			if len(ann) == 0 {
				delete(md, "annotations")
			}
		}
		delete(md, "creationTimestamp")
		if len(md) == 0 {
			delete(data, "metadata")
		}
	}
	if len(data) == 0 {
		return ""
	}
	out, err := json.Marshal(data)
	if err != nil {
		return patch
	}
	return string(out)
}

// dropDirectives removes from m, at every depth, the strategic-merge directives that change
// no value ($retainKeys, $setElementOrder/...), then what they leave empty: maps without keys,
// lists without elements, and list elements left with one plain value (their merge key alone,
// which names an element without changing it). $patch and $deleteFromPrimitiveList stay.
func dropDirectives(m map[string]any) {
	for k, v := range m {
		if k == "$retainKeys" || strings.HasPrefix(k, "$setElementOrder/") {
			delete(m, k)
			continue
		}
		if cleaned, gone := clean(v); gone {
			delete(m, k)
		} else {
			m[k] = cleaned
		}
	}
}

// clean is v (a map or a list; anything else as it is) as dropDirectives leaves it, and
// whether nothing is left of a map or list that held something.
func clean(v any) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		had := len(t)
		dropDirectives(t)
		return t, had > 0 && len(t) == 0
	case []any:
		var kept []any
		for _, e := range t {
			em, isMap := e.(map[string]any)
			if !isMap {
				kept = append(kept, e)
				continue
			}
			had := len(em)
			if _, gone := clean(em); gone || (len(em) < had && len(em) == 1 && plain(em)) {
				continue
			}
			kept = append(kept, em)
		}
		return kept, len(t) > 0 && len(kept) == 0
	}
	return v, false
}

// plain says whether every value of m is a scalar.
func plain(m map[string]any) bool {
	for _, v := range m {
		switch v.(type) {
		case map[string]any, []any:
			return false
		}
	}
	return true
}

func modified(gvk schema.GroupVersionKind, k objectset.ObjectKey, set func(*fleet.ModifiedStatus)) fleet.ModifiedStatus {
	m := fleet.ModifiedStatus{Kind: gvk.Kind, APIVersion: gvk.GroupVersion().String(), Namespace: k.Namespace, Name: k.Name}
	set(&m)
	return m
}

func sortModified(m []fleet.ModifiedStatus) {
	sort.Slice(m, func(i, j int) bool {
		a, b := m[i], m[j]
		return a.Kind+"/"+a.Namespace+"/"+a.Name < b.Kind+"/"+b.Namespace+"/"+b.Name
	})
}

func nrKey(n fleet.NonReadyStatus) string { return n.Kind + "/" + n.Namespace + "/" + n.Name }

func key(gvk schema.GroupVersionKind, ns, name string) string {
	return gvk.String() + "|" + ns + "|" + name
}
