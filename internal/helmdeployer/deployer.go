// Package helmdeployer installs, upgrades, rolls back and uninstalls a BundleDeployment's Helm
// release in the agent's own cluster with the Helm SDK. The agent's deployer and monitor use it.
//
// Each release carries labels naming the BundleDeployment and the agent's namespace, so the
// agent can find its releases after the BundleDeployment is gone (uninstall, garbage
// collection) and knows a release it did not make is not its own.
package helmdeployer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/helmrelease"
	"github.com/fleetgo/fleet/internal/render"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Release labels set by the agent (Helm stores them on the release's storage Secret).
const (
	// BundleIDLabel names the BundleDeployment a release deploys.
	BundleIDLabel = fleet.BundleIDAnnotation
	// AgentNamespaceLabel is the namespace of the agent that made the release.
	AgentNamespaceLabel = fleet.AgentNamespaceAnnotation
	// DeleteNamespaceLabel is "true" when uninstalling also deletes the release namespace.
	DeleteNamespaceLabel = "fleet.cattle.io/delete-namespace"
	// ValuesHashLabel fingerprints the values read from valuesFrom at deploy time.
	ValuesHashLabel = "fleet.cattle.io/values-from-hash"
	// DeploymentIDAnnotation (on the chart) is the deploymentID the release was made for.
	DeploymentIDAnnotation = "fleet.cattle.io/deployment-id"
	// SyncGenerationAnnotation (on the chart) is the forceSyncGeneration it was made for.
	SyncGenerationAnnotation = "fleet.cattle.io/sync-generation"
	// DefaultServiceAccount is impersonated when a bundle names none and it exists in the
	// agent's namespace.
	DefaultServiceAccount = "fleet-default"
	// DefaultMaxHistory bounds the revisions kept per release when helm.maxHistory is unset.
	DefaultMaxHistory = 5
)

// Deployer deploys releases into one cluster.
type Deployer struct {
	cfg            *rest.Config
	kube           kubernetes.Interface
	disc           *discoveryCache
	agentNamespace string
	// slots bounds the Helm actions running at once (see ParallelActions).
	slots chan struct{}
	memo  releaseMemo
	// clients are the impersonating clientsets, by ServiceAccount (see clientAs).
	clients sync.Map
}

// ParallelActions is how many installs, upgrades, rollbacks and uninstalls run at once. Each
// holds a rendered chart, its manifests decoded several times over and a gzipped release
// record; past a handful, more at once only raise the agent's peak memory, since the
// cluster's apiserver is what they wait on.
const ParallelActions = 8

// acquire waits for a free action slot; release frees it.
func (d *Deployer) acquire(ctx context.Context) error {
	select {
	case d.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Deployer) release() { <-d.slots }

// New returns a Deployer for the cluster of cfg; agentNamespace is where the agent runs.
func New(cfg *rest.Config, agentNamespace string) (*Deployer, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Deployer{cfg: cfg, kube: kube, disc: newDiscoveryCache(cfg), agentNamespace: agentNamespace,
		slots: make(chan struct{}, ParallelActions)}, nil
}

// RefreshDiscovery forgets cached API discovery (after a CRD was installed).
func (d *Deployer) RefreshDiscovery() { d.disc.Reset() }

// Input is one deploy of a BundleDeployment.
type Input struct {
	// BundleID is the BundleDeployment's name.
	BundleID string
	// Commit is the git commit of the bundle, when known.
	Commit string
	// DeploymentID is the spec's deploymentID; recorded on the chart.
	DeploymentID string
	// Files are the bundle's files (the Content's resources).
	Files render.Files
	// Options are the promoted options.
	Options fleet.BundleDeploymentOptions
	// Values and ValuesHash are what Values returned for Options, read once per deploy.
	Values     map[string]any
	ValuesHash string
	// Downstream are the Secrets and ConfigMaps (downstreamResources) to create or update in
	// the release namespace before the release.
	Downstream []metav1.Object
}

// Release identifies a Helm release (helmrelease.Release, which the pure decisions read).
type Release = helmrelease.Release

func fromHelm(rel *release.Release) *Release {
	r := &Release{Name: rel.Name, Namespace: rel.Namespace, Version: rel.Version, Manifest: rel.Manifest,
		BundleID: owner(rel), DeleteNamespace: rel.Labels[DeleteNamespaceLabel] == "true",
		ValuesHash: rel.Labels[ValuesHashLabel]}
	if rel.Info != nil {
		r.Status = rel.Info.Status
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		a := rel.Chart.Metadata.Annotations
		r.DeploymentID = a[DeploymentIDAnnotation]
		r.SyncGeneration, _ = strconv.ParseInt(a[SyncGenerationAnnotation], 10, 64)
		// Made by a Fleet agent before the move: Fleet marks only the chart, and records no
		// deploymentID there.
		r.MadeByFleet = r.DeploymentID == "" && a[fleet.BundleIDAnnotation] != ""
	}
	return r
}

// owner is the BundleDeployment a release revision belongs to: our release label, or the chart
// annotation a Fleet agent wrote.
func owner(rel *release.Release) string {
	if id := rel.Labels[BundleIDLabel]; id != "" {
		return id
	}
	if rel.Chart != nil && rel.Chart.Metadata != nil {
		return rel.Chart.Metadata.Annotations[fleet.BundleIDAnnotation]
	}
	return ""
}

// actionConfig is Helm's configuration for releases in namespace, acting as the given
// ServiceAccount of the agent's namespace (empty: the agent itself).
func (d *Deployer) actionConfig(namespace, serviceAccount string) (*action.Configuration, error) {
	cfg := d.impersonating(serviceAccount)
	ac := new(action.Configuration)
	getter := &restGetter{cfg: cfg, namespace: namespace, shared: d.disc}
	if err := ac.Init(getter, namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, err
	}
	secrets, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ac.Releases = storage.Init(driver.NewSecrets(boundedSecrets{secrets.CoreV1().Secrets(namespace)}))
	if kc, ok := ac.KubeClient.(*kube.Client); ok {
		kc.Factory = &sharedValidators{Factory: kc.Factory, shared: d.disc}
	}
	return ac, nil
}

// serviceAccount is who Helm acts as: the bundle's serviceAccount, else fleet-default when it
// exists in the agent's namespace, else the agent.
func (d *Deployer) serviceAccount(ctx context.Context, name string) (string, error) {
	want := name
	if want == "" {
		want = DefaultServiceAccount
	}
	_, err := d.kube.CoreV1().ServiceAccounts(d.agentNamespace).Get(ctx, want, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && name == "":
		return "", nil
	case apierrors.IsNotFound(err):
		return "", helmrelease.Permanent(fmt.Errorf("serviceAccount %s not found in namespace %s", name, d.agentNamespace))
	case err != nil:
		return "", err
	}
	return want, nil
}

// Current returns the newest revision of a BundleDeployment's release, or nil when there is none
// (remembered for up to ReleaseMemoTTL).
func (d *Deployer) Current(ctx context.Context, bundleID string, opts *fleet.BundleDeploymentOptions) (*Release, error) {
	name, ns := render.ReleaseName(opts, bundleID), render.Namespace(opts)
	key, now := ns+"/"+name, time.Now()
	if rel, ok := d.memo.get(key, now); ok {
		return rel, nil
	}
	ac, err := d.actionConfig(ns, "")
	if err != nil {
		return nil, err
	}
	var out *Release
	rel, err := ac.Releases.Last(name)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
	case err != nil:
		return nil, err
	default:
		if out, err = d.recordedRevision(ctx, ac, rel); err != nil {
			return nil, err
		}
	}
	d.memo.put(key, out, now)
	return out, nil
}

// recordedRevision is the release as the agent's ledger knows it: the revision it recorded when
// someone wrote a newer one, and for a release it has no record of (someone else's, or one not
// adopted) no deploymentID, so that the deploy that follows decides what to do with it.
func (d *Deployer) recordedRevision(ctx context.Context, ac *action.Configuration, last *release.Release) (*Release, error) {
	e, err := d.ledgerEntry(ctx, last.Namespace, last.Name)
	if err != nil {
		return nil, err
	}
	if e == nil {
		r := fromHelm(last)
		r.DeploymentID, r.MadeByFleet = "", false
		return r, nil
	}
	if last.Version > e.Version && (last.Version != e.Pending || digest(last) != e.PendingDigest) {
		recorded, err := ac.Releases.Get(last.Name, e.Version)
		if errors.Is(err, driver.ErrReleaseNotFound) {
			// The recorded revision is gone: no deploymentID, so the deploy that follows
			// looks at the history (and says what is wrong with it).
			r := fromHelm(last)
			r.DeploymentID, r.MadeByFleet = "", false
			return r, nil
		}
		if err != nil {
			return nil, err
		}
		last = recorded
	}
	return fromHelm(last), nil
}
