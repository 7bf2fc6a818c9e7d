package summary

import (
	"sort"
	"strings"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// maxPerState bounds each per-cluster list of a resource (IncompleteState says when cut).
const maxPerState = 10

// Resource states, worst first.
var stateOrder = []string{"Missing", "Modified", "NotReady", "WaitApplied", "Pending", "Orphaned", "Unknown", "Ready"}

// Deployment is one BundleDeployment of a GitRepo or HelmOp, as its resources are listed.
type Deployment struct {
	BD *fleet.BundleDeployment
	// Cluster is "namespace/name" of the deployment's Cluster.
	Cluster string
	// Offline: the cluster's agent has stopped checking in, so its states are unknown.
	Offline bool
	// Keys are the objects the BundleDeployment's Bundle deploys elsewhere (its resourceKey):
	// where this deployment has reported none yet, they are listed in its state.
	Keys []fleet.ResourceKey
}

// Resources lists every resource the BundleDeployments of a GitRepo or HelmOp deployed, with
// the state it has in each cluster and the worst of those as its own (status.resources).
func Resources(bds []Deployment) []fleet.GitRepoResource {
	t := resourceTable{}
	for _, c := range bds {
		t.addDeployment(c)
	}
	return t.list()
}

// resourceTable collects resources by apiVersion, kind, namespace and name, each with its state
// per cluster.
type resourceTable map[string]*resourceEntry

type resourceEntry struct {
	res    fleet.GitRepoResource
	states map[string]string
}

// resourceState is what one deployment says of one resource.
type resourceState struct {
	apiVersion, kind, namespace, name string
	cluster, state, message           string
	// incomplete: the deployment listed only the first of its non-ready or modified objects,
	// so this one's state there may be unknown.
	incomplete bool
}

func (t resourceTable) add(r resourceState) {
	k := r.apiVersion + "/" + r.kind + "/" + r.namespace + "/" + r.name
	e := t[k]
	if e == nil {
		id := r.name
		if r.namespace != "" {
			id = r.namespace + "/" + r.name
		}
		e = &resourceEntry{res: fleet.GitRepoResource{APIVersion: r.apiVersion, Kind: r.kind, Namespace: r.namespace, Name: r.name, ID: id,
			Type: resourceType(r.apiVersion, r.kind)}, states: map[string]string{}}
		t[k] = e
	}
	// One state per cluster: the worse one wins.
	if old, ok := e.states[r.cluster]; !ok || rank(r.state) < rank(old) {
		e.states[r.cluster] = r.state
	}
	if r.message != "" && e.res.Message == "" {
		e.res.Message = r.message
	}
	e.res.IncompleteState = e.res.IncompleteState || r.incomplete
}

// addDeployment adds what one BundleDeployment reports: its resources at the state of the
// deployment as a whole, then its non-ready and modified ones.
func (t resourceTable) addDeployment(c Deployment) {
	st := c.BD.Status
	at := func(apiVersion, kind, ns, name, state, message string) resourceState {
		return resourceState{apiVersion: apiVersion, kind: kind, namespace: ns, name: name, cluster: c.Cluster, state: state,
			message: message, incomplete: st.IncompleteState}
	}
	base := "Ready"
	switch {
	case c.Offline:
		base = "Unknown"
	case c.BD.Spec.DeploymentID == "":
		// Held back by its Bundle (paused, or the rollout): nothing to apply yet.
		base = "Pending"
	case st.AppliedDeploymentID != c.BD.Spec.DeploymentID:
		base = "WaitApplied"
	}
	for _, r := range st.Resources {
		t.add(at(r.APIVersion, r.Kind, r.Namespace, r.Name, base, ""))
	}
	if len(st.Resources) == 0 && base != "Ready" {
		for _, k := range c.Keys {
			t.add(at(k.APIVersion, k.Kind, k.Namespace, k.Name, base, ""))
		}
	}
	if c.Offline {
		return
	}
	for _, n := range st.NonReadyStatus {
		t.add(at(n.APIVersion, n.Kind, n.Namespace, n.Name, "NotReady", strings.Join(n.Summary.Message, "; ")))
	}
	for _, m := range st.ModifiedStatus {
		state, msg := "Modified", "modified"
		if m.Create {
			state, msg = "Missing", "missing"
		} else if m.Delete {
			state, msg = "Orphaned", "not in the release"
		}
		t.add(at(m.APIVersion, m.Kind, m.Namespace, m.Name, state, msg))
	}
}

// list is the table's resources sorted by type and ID, each with its worst state and the
// clusters in each state (at most maxPerState each).
func (t resourceTable) list() []fleet.GitRepoResource {
	out := make([]fleet.GitRepoResource, 0, len(t))
	for _, e := range t {
		out = append(out, e.resource())
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Type+"/"+a.ID < b.Type+"/"+b.ID
	})
	return out
}

func (e *resourceEntry) resource() fleet.GitRepoResource {
	worst := "Ready"
	lists := map[string][]string{}
	for cluster, state := range e.states {
		lists[state] = append(lists[state], cluster)
		if rank(state) < rank(worst) {
			worst = state
		}
	}
	r := e.res
	r.State = worst
	r.Error = worst == "Missing" || worst == "Modified" || worst == "Orphaned"
	r.Transitioning = worst == "NotReady" || worst == "WaitApplied" || worst == "Pending"
	field := map[string]*[]string{"Ready": &r.PerClusterState.Ready, "WaitApplied": &r.PerClusterState.WaitApplied,
		"Pending": &r.PerClusterState.Pending, "Modified": &r.PerClusterState.Modified, "NotReady": &r.PerClusterState.NotReady,
		"Orphaned": &r.PerClusterState.Orphaned, "Missing": &r.PerClusterState.Missing, "Unknown": &r.PerClusterState.Unknown}
	for state, clusters := range lists {
		sort.Strings(clusters)
		if len(clusters) > maxPerState {
			clusters, r.IncompleteState = clusters[:maxPerState], true
		}
		*field[state] = clusters
	}
	return r
}

func rank(state string) int {
	for i, s := range stateOrder {
		if s == state {
			return i
		}
	}
	return len(stateOrder)
}

// resourceType is "group.kind" in lower case ("kind" for the core group).
func resourceType(apiVersion, kind string) string {
	group := ""
	if i := strings.Index(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i]
	}
	if group == "" {
		return strings.ToLower(kind)
	}
	return strings.ToLower(group + "." + kind)
}
