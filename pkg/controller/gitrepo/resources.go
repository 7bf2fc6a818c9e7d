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
	add := func(apiVersion, kind, ns, name, cluster, state string) {
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
	}
	for _, c := range bds {
		st := c.bd.Status
		base := "Ready"
		switch {
		case c.offline:
			base = "Unknown"
		case st.AppliedDeploymentID != c.bd.Spec.DeploymentID:
			base = "WaitApplied"
		}
		for _, r := range st.Resources {
			add(r.APIVersion, r.Kind, r.Namespace, r.Name, c.cluster, base)
		}
		if c.offline {
			continue
		}
		for _, n := range st.NonReadyStatus {
			add(n.APIVersion, n.Kind, n.Namespace, n.Name, c.cluster, "NotReady")
		}
		for _, m := range st.ModifiedStatus {
			state := "Modified"
			if m.Create {
				state = "Missing"
			} else if m.Delete {
				state = "Orphaned"
			}
			add(m.APIVersion, m.Kind, m.Namespace, m.Name, c.cluster, state)
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
