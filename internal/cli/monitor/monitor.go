// Package monitor takes `fleet monitor`'s snapshots of the manager and `fleet analyze`'s look at
// them: per GitRepo, Bundle, BundleDeployment and Cluster the fields that tell whether a rollout
// moves, and the issues found (a commit not applied, a deployment not applied or its Content
// missing, a cluster offline, ...). Snapshots are JSON, one per line, so that a series taken over
// time can be searched with jq or compared by `fleet analyze`. No Secret is read. (CLI)
package monitor

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Snapshot is one look at the manager.
type Snapshot struct {
	Time              time.Time          `json:"time"`
	GitRepos          []GitRepo          `json:"gitrepos"`
	Bundles           []Bundle           `json:"bundles"`
	BundleDeployments []BundleDeployment `json:"bundledeployments"`
	Clusters          []Cluster          `json:"clusters"`
	Issues            []Issue            `json:"issues"`
}

// GitRepo is what a snapshot keeps of a GitRepo.
type GitRepo struct {
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	Commit             string `json:"commit,omitempty"`
	PollingCommit      string `json:"pollingCommit,omitempty"`
	Ready              string `json:"ready,omitempty"`
	ReadyBundles       string `json:"readyBundleDeployments,omitempty"`
}

// Bundle is what a snapshot keeps of a Bundle.
type Bundle struct {
	Namespace          string `json:"namespace"`
	Name               string `json:"name"`
	Generation         int64  `json:"generation"`
	ObservedGeneration int64  `json:"observedGeneration"`
	Commit             string `json:"commit,omitempty"`
	ReadyClusters      string `json:"readyClusters,omitempty"`
	Ready              string `json:"ready,omitempty"`
}

// BundleDeployment is what a snapshot keeps of a BundleDeployment.
type BundleDeployment struct {
	Namespace           string `json:"namespace"`
	Name                string `json:"name"`
	Bundle              string `json:"bundle,omitempty"`
	DeploymentID        string `json:"deploymentID"`
	StagedDeploymentID  string `json:"stagedDeploymentID,omitempty"`
	AppliedDeploymentID string `json:"appliedDeploymentID,omitempty"`
	State               string `json:"state,omitempty"`
	Release             string `json:"release,omitempty"`
}

// Cluster is what a snapshot keeps of a Cluster.
type Cluster struct {
	Namespace    string    `json:"namespace"`
	Name         string    `json:"name"`
	ClusterNS    string    `json:"clusterNamespace,omitempty"`
	LastSeen     time.Time `json:"lastSeen,omitempty"`
	State        string    `json:"state,omitempty"`
	ReadyBundles string    `json:"readyBundles,omitempty"`
}

// Issue is something a snapshot found wrong. Type is one of the constants below.
type Issue struct {
	Type      string `json:"type"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Message   string `json:"message"`
}

// Key names the object and the issue, to compare snapshots.
func (i Issue) Key() string { return i.Type + " " + i.Kind + " " + i.Namespace + "/" + i.Name }

// Issue types.
const (
	// NotReady: the object's Ready condition is not True (its message says why).
	NotReady = "NotReady"
	// GenerationNotObserved: the controller has not processed the newest spec.
	GenerationNotObserved = "GenerationNotObserved"
	// CommitNotApplied: a GitRepo's branch is at a commit its Bundles are not at yet.
	CommitNotApplied = "CommitNotApplied"
	// NotApplied: a BundleDeployment's deploymentID is not what its agent applied.
	NotApplied = "NotApplied"
	// ContentMissing: the Content a BundleDeployment deploys does not exist.
	ContentMissing = "ContentMissing"
	// NoBundle: a BundleDeployment whose Bundle is gone.
	NoBundle = "NoBundle"
	// Offline: a Cluster's agent has not checked in for three check-in intervals.
	Offline = "Offline"
	// NoClusterNamespace: a Cluster the manager has not given its namespace.
	NoClusterNamespace = "NoClusterNamespace"
)

// Take takes a snapshot of namespace ns ("" for all) through api.
func Take(api fleetcontrollers.Interface, ns string, now time.Time) (*Snapshot, error) {
	s := &Snapshot{Time: now.UTC().Truncate(time.Second)}
	grs, err := api.GitRepo().List(ns, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing gitrepos: %w", err)
	}
	bundles, err := api.Bundle().List(ns, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing bundles: %w", err)
	}
	clusters, err := api.Cluster().List(ns, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing clusters: %w", err)
	}
	bds, err := api.BundleDeployment().List("", metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing bundledeployments: %w", err)
	}
	bundleCommits := map[string]string{}
	for i := range bundles.Items {
		b := &bundles.Items[i]
		bundleCommits[b.Namespace+"/"+b.Name] = b.Labels[fleet.CommitLabel]
		s.addBundle(b)
	}
	for i := range grs.Items {
		s.addGitRepo(&grs.Items[i], bundles.Items)
	}
	contents := map[string]bool{} // exists, by name: many deployments share a Content
	for i := range bds.Items {
		bd := &bds.Items[i]
		bns := bd.Labels[fleet.BundleNamespaceLabel]
		if ns != "" && bns != ns {
			continue
		}
		_, hasBundle := bundleCommits[bns+"/"+bd.Labels[fleet.BundleLabel]]
		if err := s.addDeployment(api, bd, hasBundle, contents); err != nil {
			return nil, err
		}
	}
	for i := range clusters.Items {
		s.addCluster(&clusters.Items[i])
	}
	slices.SortFunc(s.Issues, func(a, b Issue) int { return strings.Compare(a.Key(), b.Key()) })
	return s, nil
}

func readyOf(conds []genericcondition.GenericCondition) (string, string) {
	c := fleet.FindCondition(conds, fleet.ConditionReady)
	if c == nil {
		return "", ""
	}
	return string(c.Status), c.Message
}

func (s *Snapshot) issue(typ, kind string, meta metav1.Object, format string, args ...any) {
	s.Issues = append(s.Issues, Issue{Type: typ, Kind: kind, Namespace: meta.GetNamespace(), Name: meta.GetName(), Message: fmt.Sprintf(format, args...)})
}

func (s *Snapshot) addGitRepo(gr *fleet.GitRepo, bundles []fleet.Bundle) {
	ready, msg := readyOf(gr.Status.Conditions)
	s.GitRepos = append(s.GitRepos, GitRepo{Namespace: gr.Namespace, Name: gr.Name, Generation: gr.Generation,
		ObservedGeneration: gr.Status.ObservedGeneration, Commit: gr.Status.Commit, PollingCommit: gr.Status.PollingCommit,
		Ready: ready, ReadyBundles: gr.Status.Display.ReadyBundleDeployments})
	if ready != string(corev1.ConditionTrue) {
		s.issue(NotReady, "GitRepo", gr, "Ready is %q: %s", ready, msg)
	}
	if gr.Status.ObservedGeneration != gr.Generation {
		s.issue(GenerationNotObserved, "GitRepo", gr, "generation %d, observed %d", gr.Generation, gr.Status.ObservedGeneration)
	}
	if gr.Status.PollingCommit != "" && gr.Status.PollingCommit != gr.Status.Commit {
		s.issue(CommitNotApplied, "GitRepo", gr, "the branch is at %s, the GitRepo at %q", gr.Status.PollingCommit, gr.Status.Commit)
	}
	for _, b := range bundles {
		if b.Namespace == gr.Namespace && b.Labels[fleet.RepoLabel] == gr.Name && gr.Status.Commit != "" && b.Labels[fleet.CommitLabel] != gr.Status.Commit {
			s.issue(CommitNotApplied, "Bundle", &b, "at commit %q, its GitRepo at %s", b.Labels[fleet.CommitLabel], gr.Status.Commit)
		}
	}
}

func (s *Snapshot) addBundle(b *fleet.Bundle) {
	ready, msg := readyOf(b.Status.Conditions)
	s.Bundles = append(s.Bundles, Bundle{Namespace: b.Namespace, Name: b.Name, Generation: b.Generation,
		ObservedGeneration: b.Status.ObservedGeneration, Commit: b.Labels[fleet.CommitLabel], ReadyClusters: b.Status.Display.ReadyClusters, Ready: ready})
	if ready != string(corev1.ConditionTrue) {
		s.issue(NotReady, "Bundle", b, "Ready is %q: %s", ready, msg)
	}
	if b.Status.ObservedGeneration != b.Generation {
		s.issue(GenerationNotObserved, "Bundle", b, "generation %d, observed %d", b.Generation, b.Status.ObservedGeneration)
	}
}

func (s *Snapshot) addDeployment(api fleetcontrollers.Interface, bd *fleet.BundleDeployment, hasBundle bool, contents map[string]bool) error {
	s.BundleDeployments = append(s.BundleDeployments, BundleDeployment{Namespace: bd.Namespace, Name: bd.Name,
		Bundle: bd.Labels[fleet.BundleNamespaceLabel] + "/" + bd.Labels[fleet.BundleLabel], DeploymentID: bd.Spec.DeploymentID,
		StagedDeploymentID: bd.Spec.StagedDeploymentID, AppliedDeploymentID: bd.Status.AppliedDeploymentID,
		State: bd.Status.Display.State, Release: bd.Status.Release})
	if !hasBundle && bd.DeletionTimestamp == nil {
		s.issue(NoBundle, "BundleDeployment", bd, "its Bundle %s/%s does not exist", bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.BundleLabel])
	}
	if bd.Spec.DeploymentID != "" && !fleet.Applied(&bd.Spec, &bd.Status) {
		s.issue(NotApplied, "BundleDeployment", bd, "deploymentID %s, applied %q (state %s)", bd.Spec.DeploymentID, bd.Status.AppliedDeploymentID, bd.Status.Display.State)
	}
	if ready, msg := readyOf(bd.Status.Conditions); ready != "" && ready != string(corev1.ConditionTrue) {
		s.issue(NotReady, "BundleDeployment", bd, "Ready is %q: %s", ready, msg)
	}
	content, _, _ := strings.Cut(bd.Spec.DeploymentID, ":")
	if content == "" || bd.Spec.OCIContents {
		return nil // (a registry keeps OCI contents)
	}
	exists, seen := contents[content]
	if !seen {
		_, err := api.Content().Get(content, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsForbidden(err) {
			return fmt.Errorf("reading content %s: %w", content, err)
		}
		exists = !apierrors.IsNotFound(err)
		contents[content] = exists
	}
	if !exists {
		s.issue(ContentMissing, "BundleDeployment", bd, "Content %s does not exist", content)
	}
	return nil
}

func (s *Snapshot) addCluster(c *fleet.Cluster) {
	s.Clusters = append(s.Clusters, Cluster{Namespace: c.Namespace, Name: c.Name, ClusterNS: c.Status.Namespace,
		LastSeen: c.Status.Agent.LastSeen.UTC(), State: c.Status.Display.State, ReadyBundles: c.Status.Display.ReadyBundles})
	if c.Status.Namespace == "" {
		s.issue(NoClusterNamespace, "Cluster", c, "no cluster namespace yet")
	}
	if c.Status.Display.State == "Offline" {
		s.issue(Offline, "Cluster", c, "last check-in %s", c.Status.Agent.LastSeen.UTC().Format(time.RFC3339))
	}
}
