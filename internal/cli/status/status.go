// Package status answers "where is my commit, on which clusters, and what is stopping it?" in
// one view: GitRepo -> commit -> Bundles -> clusters, each with its state, ready counts, the
// agent's last check-in and the first error, and the clusters still on an older commit. It
// reads only the GitRepos, Bundles and Clusters of the namespaces asked for; the
// BundleDeployments (in the clusters' namespaces) when the user may list them, else what the
// Bundles' status says of their non-ready clusters. (CLI)
package status

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Report is the tree of one or more GitRepos.
type Report struct {
	GitRepos []GitRepo `json:"gitRepos"`
}

// GitRepo is one GitRepo and where its commit is.
type GitRepo struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Repo      string `json:"repo"`
	// Commit is the applied commit; LatestCommit the newest one found, when it is not applied yet.
	Commit       string `json:"commit,omitempty"`
	LatestCommit string `json:"latestCommit,omitempty"`
	State        string `json:"state"`
	// ReadyClusters of DesiredReadyClusters are ready for every Bundle of the GitRepo.
	ReadyClusters        int      `json:"readyClusters"`
	DesiredReadyClusters int      `json:"desiredReadyClusters"`
	Error                string   `json:"error,omitempty"`
	Bundles              []Bundle `json:"bundles"`
	// Complete is false when the BundleDeployments could not be read: then clusters are listed
	// only where the Bundle's status names them (the non-ready ones, up to ten).
	Complete bool `json:"complete"`
}

// Bundle is one Bundle of a GitRepo.
type Bundle struct {
	Name     string    `json:"name"`
	State    string    `json:"state"`
	Ready    int       `json:"ready"`
	Desired  int       `json:"desired"`
	Error    string    `json:"error,omitempty"`
	Clusters []Cluster `json:"clusters"`
	// Rollout is where the Bundle's progressive rollout stands, when it has one.
	Rollout *Rollout `json:"rollout,omitempty"`
	// Secrets are its SOPS files, sealed to each cluster (docs/secrets.md).
	Secrets []string `json:"secrets,omitempty"`
	// Held says which clusters a rollback holds at an earlier revision, and why (docs/history.md).
	Held string `json:"held,omitempty"`
}

// Rollout is a Bundle's progressive rollout (a RolloutPolicy's stages).
type Rollout struct {
	Policy  string       `json:"policy"`
	Phase   string       `json:"phase"`
	Stage   string       `json:"stage,omitempty"`
	Message string       `json:"message,omitempty"`
	Stages  []StageCount `json:"stages"`
}

// StageCount is one stage of a rollout.
type StageCount struct {
	Name     string `json:"name"`
	Clusters int    `json:"clusters"`
	Passing  int    `json:"passing"`
	Failed   int    `json:"failed"`
	State    string `json:"state"`
}

// rolloutOf reads the Bundle's Rollout; nil without one (or without the right to read it).
func rolloutOf(api fleetcontrollers.Interface, b *fleet.Bundle) *Rollout {
	r, err := api.Rollout().Get(b.Namespace, b.Name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	out := &Rollout{Policy: r.Status.Policy, Phase: r.Status.Phase, Stage: r.Status.Stage, Message: r.Status.Message, Stages: []StageCount{}}
	for _, s := range r.Status.Stages {
		out.Stages = append(out.Stages, StageCount{Name: s.Name, Clusters: s.Clusters, Passing: s.Passing, Failed: s.Failed, State: s.State})
	}
	return out
}

// Cluster is a Bundle's deployment to one cluster.
type Cluster struct {
	Name  string `json:"name"`
	State string `json:"state"`
	// Commit is the commit of what the cluster was given, when it is older than the GitRepo's.
	OlderCommit string `json:"olderCommit,omitempty"`
	// LastSeen is the agent's last check-in; Offline says it stopped checking in.
	LastSeen *time.Time `json:"lastSeen,omitempty"`
	Offline  bool       `json:"offline,omitempty"`
	Message  string     `json:"message,omitempty"`
	// Sealed, for a Bundle with secrets: "unsealed" once the agent opened this cluster's copies
	// and deployed them, "waiting" before.
	Sealed string `json:"sealed,omitempty"`
	// HeldAt is the revision a rollback holds the cluster at.
	HeldAt string `json:"heldAt,omitempty"`
}

// Ready says whether every GitRepo of the report is ready at its latest commit.
func (r *Report) Ready() bool {
	for _, g := range r.GitRepos {
		if g.State != string(fleet.Ready) || g.LatestCommit != "" {
			return false
		}
	}
	return len(r.GitRepos) > 0
}

// Options say what to gather.
type Options struct {
	// Namespace of the GitRepos; with All, every GitRepo of it ("" with All: of every namespace).
	Namespace, Name string
	All             bool
}

// Gather reads the report from the manager.
func Gather(api fleetcontrollers.Interface, o Options) (*Report, error) {
	var repos []fleet.GitRepo
	if o.All {
		list, err := api.GitRepo().List(o.Namespace, metav1.ListOptions{})
		if err != nil {
			return nil, readError("gitrepos", o.Namespace, err)
		}
		repos = list.Items
	} else {
		gr, err := api.GitRepo().Get(o.Namespace, o.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("gitrepo %q not found in namespace %s", o.Name, o.Namespace)
		}
		if err != nil {
			return nil, readError("gitrepos", o.Namespace, err)
		}
		repos = []fleet.GitRepo{*gr}
	}
	sort.Slice(repos, func(i, j int) bool {
		return repos[i].Namespace+"/"+repos[i].Name < repos[j].Namespace+"/"+repos[j].Name
	})
	r := &Report{GitRepos: []GitRepo{}}
	clusters := map[string]map[string]*fleet.Cluster{} // namespace -> name -> Cluster
	for i := range repos {
		gr := &repos[i]
		if clusters[gr.Namespace] == nil {
			list, err := api.Cluster().List(gr.Namespace, metav1.ListOptions{})
			if err != nil {
				return nil, readError("clusters", gr.Namespace, err)
			}
			clusters[gr.Namespace] = map[string]*fleet.Cluster{}
			for j := range list.Items {
				clusters[gr.Namespace][list.Items[j].Name] = &list.Items[j]
			}
		}
		g, err := gather(api, gr, clusters[gr.Namespace])
		if err != nil {
			return nil, err
		}
		r.GitRepos = append(r.GitRepos, *g)
	}
	return r, nil
}

func readError(resource, ns string, err error) error {
	where := "namespace " + ns
	if ns == "" {
		where = "any namespace"
	}
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("you may not read %s in %s", resource, where)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the manager refused your credentials (401 Unauthorized)")
	}
	return fmt.Errorf("reading %s in %s: %w", resource, where, err)
}

func gather(api fleetcontrollers.Interface, gr *fleet.GitRepo, clusters map[string]*fleet.Cluster) (*GitRepo, error) {
	g := &GitRepo{Namespace: gr.Namespace, Name: gr.Name, Repo: gitsource.Redact(gr.Spec.Repo), Commit: gr.Status.Commit,
		State: summary.GitRepoState(gr), ReadyClusters: gr.Status.ReadyClusters, DesiredReadyClusters: gr.Status.DesiredReadyClusters,
		Error:   summary.SourceProblem(gr.Status.Conditions),
		Bundles: []Bundle{}, Complete: true}
	if c := gr.Status.PollingCommit; c != "" && c != gr.Status.Commit {
		g.LatestCommit = c
	}
	sel := labels.Set{fleet.RepoLabel: gr.Name}.String()
	bundles, err := api.Bundle().List(gr.Namespace, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, readError("bundles", gr.Namespace, err)
	}
	var bds []fleet.BundleDeployment
	list, err := api.BundleDeployment().List("", metav1.ListOptions{
		LabelSelector: labels.Set{fleet.RepoLabel: gr.Name, fleet.BundleNamespaceLabel: gr.Namespace}.String()})
	switch {
	case apierrors.IsForbidden(err):
		g.Complete = false
	case err != nil:
		return nil, readError("bundledeployments", "", err)
	default:
		bds = list.Items
	}
	sort.Slice(bundles.Items, func(i, j int) bool { return bundles.Items[i].Name < bundles.Items[j].Name })
	for i := range bundles.Items {
		b := &bundles.Items[i]
		out := Bundle{Name: b.Name, State: summary.BundleState(b), Ready: b.Status.Summary.Ready, Desired: b.Status.Summary.DesiredReady,
			Error: summary.Problem(b.Status.Conditions, fleet.ConditionReady), Clusters: []Cluster{}, Rollout: rolloutOf(api, b), Held: summary.Held(b)}
		if g.Complete {
			for j := range bds {
				if bds[j].Labels[fleet.BundleLabel] == b.Name {
					out.Clusters = append(out.Clusters, fromDeployment(&bds[j], gr.Status.Commit, clusters))
					out.Secrets = summary.SealedNames(out.Secrets, &bds[j])
				}
			}
		} else {
			for _, nr := range b.Status.Summary.NonReadyResources {
				out.Clusters = append(out.Clusters, fromSummary(nr, clusters))
			}
		}
		sort.Slice(out.Clusters, func(i, j int) bool { return out.Clusters[i].Name < out.Clusters[j].Name })
		g.Bundles = append(g.Bundles, out)
	}
	return g, nil
}

func fromDeployment(bd *fleet.BundleDeployment, commit string, clusters map[string]*fleet.Cluster) Cluster {
	c := Cluster{Name: bd.Labels[fleet.ClusterLabel], State: string(summary.State(bd))}
	if cm := bd.Labels[fleet.CommitLabel]; cm != "" && commit != "" && cm != commit {
		c.OlderCommit = cm
	}
	c.Message = deploymentMessage(bd)
	c.Sealed, c.HeldAt = summary.Sealed(bd), summary.HeldAt(bd)
	agent(&c, clusters)
	return c
}

// deploymentMessage is the first thing a deployment's status says is wrong.
func deploymentMessage(bd *fleet.BundleDeployment) string {
	if d := fleet.FindCondition(bd.Status.Conditions, fleet.ConditionDeployed); d != nil && d.Status == corev1.ConditionFalse {
		return d.Message
	}
	for _, n := range bd.Status.NonReadyStatus {
		msg := strings.Join(n.Summary.Message, "; ")
		return strings.TrimSpace(fmt.Sprintf("%s %s %s", summary.ResourceName(n.APIVersion, n.Kind, n.Namespace, n.Name), n.Summary.State, msg))
	}
	for _, m := range bd.Status.ModifiedStatus {
		return summary.ResourceName(m.APIVersion, m.Kind, m.Namespace, m.Name) + " modified"
	}
	return ""
}

func fromSummary(nr fleet.NonReadyResource, clusters map[string]*fleet.Cluster) Cluster {
	name := nr.Name
	if i := strings.LastIndex(name, "/"); i >= 0 {
		name = name[i+1:]
	}
	c := Cluster{Name: name, State: string(nr.State), Message: nr.Message}
	agent(&c, clusters)
	return c
}

// agent adds the cluster's last check-in.
func agent(c *Cluster, clusters map[string]*fleet.Cluster) {
	cl := clusters[c.Name]
	if cl == nil {
		return
	}
	if !cl.Status.Agent.LastSeen.IsZero() {
		t := cl.Status.Agent.LastSeen.Time
		c.LastSeen = &t
	}
	c.Offline = cl.Status.Display.State == "Offline"
}
