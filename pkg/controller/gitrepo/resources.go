package gitrepo

import (
	"sort"
	"strings"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// maxPerState bounds each per-cluster list of a resource (IncompleteState says when cut).
const maxPerState = 10

// Resource states, worst first.
var stateOrder = []string{"Missing", "Modified", "NotReady", "WaitApplied", "Pending", "Orphaned", "Unknown", "Ready"}

type clusterResource struct {
	bd      *fleet.BundleDeployment
	cluster string
	offline bool
	// keys are the objects the BundleDeployment's Bundle deploys elsewhere (its resourceKey):
	// where this deployment has reported none yet, they are listed in its state.
	keys []fleet.ResourceKey
}

// resources lists every resource the GitRepo's BundleDeployments deployed, with the state it
// has in each cluster and the worst of those as its own.
func resources(bds []clusterResource) []fleet.GitRepoResource {
	type entry struct {
		res    fleet.GitRepoResource
		states map[string]string
	}
	byKey := map[string]*entry{}
	key := func(apiVersion, kind, ns, name string) string { return apiVersion + "/" + kind + "/" + ns + "/" + name }
	var incomplete bool
	add := func(apiVersion, kind, ns, name, cluster, state string, message ...string) {
		k := key(apiVersion, kind, ns, name)
		e := byKey[k]
		if e == nil {
			id := name
			if ns != "" {
				id = ns + "/" + name
			}
			e = &entry{res: fleet.GitRepoResource{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name, ID: id,
				Type: resourceType(apiVersion, kind)}, states: map[string]string{}}
			byKey[k] = e
		}
		// One state per cluster: the worse one wins.
		if old, ok := e.states[cluster]; !ok || rank(state) < rank(old) {
			e.states[cluster] = state
		}
		if len(message) > 0 && message[0] != "" && e.res.Message == "" {
			e.res.Message = message[0]
		}
		// A deployment that listed only the first of its non-ready or modified objects may
		// leave this one's state unknown there.
		e.res.IncompleteState = e.res.IncompleteState || incomplete
	}
	for _, c := range bds {
		st := c.bd.Status
		incomplete = st.IncompleteState
		base := "Ready"
		switch {
		case c.offline:
			base = "Unknown"
		case c.bd.Spec.DeploymentID == "":
			// Held back by its Bundle (paused, or the rollout): nothing to apply yet.
			base = "Pending"
		case st.AppliedDeploymentID != c.bd.Spec.DeploymentID:
			base = "WaitApplied"
		}
		for _, r := range st.Resources {
			add(r.APIVersion, r.Kind, r.Namespace, r.Name, c.cluster, base)
		}
		if len(st.Resources) == 0 && base != "Ready" {
			for _, k := range c.keys {
				add(k.APIVersion, k.Kind, k.Namespace, k.Name, c.cluster, base)
			}
		}
		if c.offline {
			continue
		}
		for _, n := range st.NonReadyStatus {
			add(n.APIVersion, n.Kind, n.Namespace, n.Name, c.cluster, "NotReady", strings.Join(n.Summary.Message, "; "))
		}
		for _, m := range st.ModifiedStatus {
			state, msg := "Modified", "modified"
			if m.Create {
				state, msg = "Missing", "missing"
			} else if m.Delete {
				state, msg = "Orphaned", "not in the release"
			}
			add(m.APIVersion, m.Kind, m.Namespace, m.Name, c.cluster, state, msg)
		}
	}
	out := make([]fleet.GitRepoResource, 0, len(byKey))
	for _, e := range byKey {
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
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		return a.Type+"/"+a.ID < b.Type+"/"+b.ID
	})
	return out
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
