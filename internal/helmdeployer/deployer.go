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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/metrics"
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

// Release identifies a Helm release.
type Release struct {
	Name      string
	Namespace string
	Version   int
	// BundleID is the BundleDeployment the release belongs to.
	BundleID string
	// DeleteNamespace is true when uninstalling deletes the namespace too.
	DeleteNamespace bool
	// Manifest is the rendered manifest of this revision.
	Manifest string
	// DeploymentID and SyncGeneration are what the release was made for.
	DeploymentID   string
	SyncGeneration int64
	// ValuesHash fingerprints the valuesFrom data it was made with.
	ValuesHash string
	// Status is Helm's release status.
	Status release.Status
	// MadeByFleet is true for a revision a Fleet agent made (before moving onto this one): it
	// records no deploymentID, only its BundleDeployment in the chart's annotations.
	MadeByFleet bool
}

// String is the release as Fleet reports it: "namespace/name:revision".
func (r *Release) String() string {
	return r.Namespace + "/" + r.Name + ":" + strconv.Itoa(r.Version)
}

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

// recoverPending takes over a release left pending by an agent killed mid-operation (only this
// agent deploys it, and it is not deploying it now). The interrupted revision is marked failed,
// so the next upgrade goes ahead instead of waiting forever, and the revisions deployed before it
// superseded: Helm then diffs the next upgrade against the interrupted revision, whose objects
// are (some of) what the cluster now has, not against the older one. Otherwise a field the
// interrupted revision added and the next one drops (a nodeSelector, say) would never be removed.
func recoverPending(ac *action.Configuration, last *release.Release) error {
	last.Info.Status = release.StatusFailed
	last.Info.Description = "left pending by an interrupted agent; recovered"
	if err := ac.Releases.Update(last); err != nil {
		return err
	}
	deployed, err := ac.Releases.DeployedAll(last.Name)
	if err != nil && !errors.Is(err, driver.ErrNoDeployedReleases) {
		return err
	}
	for _, r := range deployed {
		if r.Version < last.Version {
			r.Info.Status = release.StatusSuperseded
			if err := ac.Releases.Update(r); err != nil {
				return err
			}
		}
	}
	return nil
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
		return "", Permanent(fmt.Errorf("serviceAccount %s not found in namespace %s", name, d.agentNamespace))
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
	if last.Version > e.Version && last.Version != e.Pending {
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

// Deploy installs or upgrades the release of in. A release another agent or a person made
// under the same name is not taken over unless helm.takeOwnership is set.
func (d *Deployer) Deploy(ctx context.Context, in Input) (*Release, error) {
	key := render.Namespace(&in.Options) + "/" + render.ReleaseName(&in.Options, in.BundleID)
	rel, err := d.deploy(ctx, in)
	if err != nil {
		// A failed deploy may still have written a revision.
		d.memo.forget(key)
		return nil, err
	}
	d.memo.put(key, rel, time.Now())
	return rel, nil
}

func (d *Deployer) deploy(ctx context.Context, in Input) (*Release, error) {
	opts := in.Options
	helmOpts := opts.Helm
	if helmOpts == nil {
		helmOpts = &fleet.HelmOptions{}
	}
	// A deploy that waits for readiness (timeoutSeconds, atomic) may take minutes and holds
	// no slot, so it cannot stall the others.
	if helmOpts.TimeoutSeconds <= 0 && !helmOpts.Atomic {
		if err := d.acquire(ctx); err != nil {
			return nil, err
		}
		defer d.release()
	}
	name, ns := render.ReleaseName(&opts, in.BundleID), render.Namespace(&opts)
	c, post, err := render.Chart(in.Files, &opts, name)
	if err != nil {
		return nil, Permanent(err)
	}
	annotateChart(c, in)
	ac, createdNS, sa, err := d.prepare(ctx, ns, in)
	if err != nil {
		return nil, err
	}
	last, err := d.lastRelease(ctx, ac, ns, name, in.BundleID, helmOpts.TakeOwnership)
	if err != nil {
		return nil, err
	}
	run := &helmRun{ac: ac, name: name, ns: ns, opts: helmOpts, labels: d.releaseLabels(in),
		post: &postRenderer{setID: SetID(in.BundleID), keep: opts.KeepResources, deleteCRDs: opts.DeleteCRDResources, kustomize: post,
			namespace: opts.TargetNamespace, namespaced: d.disc.namespaced}}
	if run.post.ignored, err = d.ignoredFields(ctx, last, &opts, ns, sa); err != nil {
		return nil, err
	}
	mine := entry{Namespace: ns, Name: name, BundleID: in.BundleID, DeleteNamespace: opts.DeleteNamespace, CreatedNamespace: createdNS,
		ServiceAccount: sa}
	if err := d.intend(ctx, mine, last); err != nil {
		return nil, err
	}
	started := time.Now()
	var rel *release.Release
	if last == nil {
		rel, err = run.install(ctx, c, in.Values)
	} else {
		rel, err = run.upgrade(ctx, c, in.Values)
	}
	metrics.Deployed(last == nil, time.Since(started))
	if run.post.ignored != nil {
		mine.IgnoredRendered = run.post.ignored.renderedJSON()
	}
	// Whatever revision the action left (a failed one, an atomic rollback's) is the agent's.
	if lerr := d.writeLedger(ctx, ac, mine); lerr != nil {
		err = errors.Join(err, lerr)
	}
	if err != nil {
		if isUnknownKind(err) {
			d.RefreshDiscovery()
		}
		return nil, classify(fmt.Errorf("deploying release %s/%s: %w", ns, name, err))
	}
	if containsCRD(rel.Manifest) {
		d.RefreshDiscovery()
	}
	return fromHelm(rel), nil
}

// prepare readies the release namespace (allowed, created, labelled, the downstreamResources
// copied into it) and returns Helm's configuration for it, acting as the bundle's service
// account.
func (d *Deployer) prepare(ctx context.Context, ns string, in Input) (ac *action.Configuration, created bool, sa string, err error) {
	opts := &in.Options
	as, sa, err := d.bundleClient(ctx, opts.ServiceAccount)
	if err != nil {
		return nil, false, "", err
	}
	if err := d.namespaceAllowed(ctx, ns, opts); err != nil {
		return nil, false, "", err
	}
	created, err = ensureNamespace(ctx, d.kube, as, ns, opts)
	if err != nil {
		return nil, false, "", err
	}
	if err := applyDownstream(ctx, as, ns, in.BundleID, in.Downstream); err != nil {
		return nil, created, "", err
	}
	ac, err = d.actionConfig(ns, sa)
	if err != nil {
		return nil, created, "", err
	}
	if ac.Capabilities, err = d.disc.capabilities(); err != nil {
		return nil, created, "", err
	}
	return ac, created, sa, nil
}

// releaseLabels are the labels of this agent's release records.
func (d *Deployer) releaseLabels(in Input) map[string]string {
	labels := map[string]string{BundleIDLabel: in.BundleID, AgentNamespaceLabel: d.agentNamespace}
	if in.Options.DeleteNamespace {
		labels[DeleteNamespaceLabel] = "true"
	}
	if in.ValuesHash != "" {
		labels[ValuesHashLabel] = in.ValuesHash
	}
	return labels
}

// lastRelease is the release's newest revision (nil: none), refused when another bundle owns
// it (unless taken over) and recovered when an interrupted agent left it pending.
func (d *Deployer) lastRelease(ctx context.Context, ac *action.Configuration, ns, name, bundleID string, takeOwnership bool) (*release.Release, error) {
	// Current has usually just read the release. One it found absent is not listed again, here
	// or by Helm's install before it writes the first revision: a list just after the namespace
	// was created waits for the apiserver's watch cache to catch up, about 100 ms. Should the
	// release exist after all, writing revision 1 fails, the memo is forgotten and the retry
	// reads it.
	if known, ok := d.memo.get(ns+"/"+name, time.Now()); ok && known == nil {
		ac.Releases.Driver = &absentRelease{Driver: ac.Releases.Driver, name: name}
		return nil, nil
	}
	last, err := ac.Releases.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading release %s/%s: %w", ns, name, err)
	}
	e, err := d.verified(ctx, ac, ns, name)
	switch {
	case errors.Is(err, errNotRecorded) && !takeOwnership:
		return nil, Permanent(fmt.Errorf("release %s/%s exists and this agent did not make it (set helm.takeOwnership to adopt it)", ns, name))
	case errors.Is(err, errNotRecorded):
	case err != nil:
		return nil, err
	case e.BundleID != bundleID && !takeOwnership:
		return nil, Permanent(fmt.Errorf("release %s/%s belongs to %q, not to this bundle (set helm.takeOwnership to adopt it)", ns, name, e.BundleID))
	default:
		// Revisions someone else wrote are gone: read the agent's own newest again.
		if last, err = ac.Releases.Last(name); errors.Is(err, driver.ErrReleaseNotFound) {
			return nil, nil
		} else if err != nil {
			return nil, fmt.Errorf("reading release %s/%s: %w", ns, name, err)
		}
	}
	if last.Info.Status.IsPending() {
		if err := recoverPending(ac, last); err != nil {
			return nil, fmt.Errorf("recovering pending release %s/%s: %w", ns, name, err)
		}
	}
	return last, nil
}

// helmRun is one install or upgrade of a release with the bundle's Helm options.
type helmRun struct {
	ac       *action.Configuration
	name, ns string
	opts     *fleet.HelmOptions
	labels   map[string]string
	post     *postRenderer
}

func (r *helmRun) timeout() time.Duration { return time.Duration(r.opts.TimeoutSeconds) * time.Second }

func (r *helmRun) install(ctx context.Context, c *chart.Chart, values map[string]any) (*release.Release, error) {
	install := action.NewInstall(r.ac)
	install.ReleaseName, install.Namespace = r.name, r.ns
	install.Timeout = r.timeout()
	install.Wait = install.Timeout > 0
	install.WaitForJobs = r.opts.WaitForJobs && install.Wait
	install.Atomic = r.opts.Atomic
	install.TakeOwnership = r.opts.TakeOwnership
	install.SkipSchemaValidation = r.opts.SkipSchemaValidation
	// Templates may look names up (getHostByName), as in Fleet, unless helm.disableDNS.
	install.EnableDNS = !r.opts.DisableDNS
	install.Labels = r.labels
	install.PostRenderer = r.post
	return install.RunWithContext(ctx, c, values)
}

func (r *helmRun) upgrade(ctx context.Context, c *chart.Chart, values map[string]any) (*release.Release, error) {
	upgrade := action.NewUpgrade(r.ac)
	upgrade.Namespace = r.ns
	upgrade.Timeout = r.timeout()
	upgrade.Wait = upgrade.Timeout > 0
	upgrade.WaitForJobs = r.opts.WaitForJobs && upgrade.Wait
	upgrade.Atomic = r.opts.Atomic
	upgrade.Force = r.opts.Force
	upgrade.TakeOwnership = r.opts.TakeOwnership
	upgrade.SkipSchemaValidation = r.opts.SkipSchemaValidation
	upgrade.EnableDNS = !r.opts.DisableDNS
	upgrade.MaxHistory = r.opts.MaxHistory
	if upgrade.MaxHistory <= 0 {
		upgrade.MaxHistory = DefaultMaxHistory
	}
	upgrade.Labels = r.labels
	upgrade.PostRenderer = r.post
	return upgrade.RunWithContext(ctx, r.name, c, values)
}

// absentRelease is a release driver that knows the release name has no revisions until it
// creates the first one.
type absentRelease struct {
	driver.Driver
	name    string
	created atomic.Bool
}

func (a *absentRelease) Query(labels map[string]string) ([]*release.Release, error) {
	if labels["name"] == a.name && !a.created.Load() {
		return nil, driver.ErrReleaseNotFound
	}
	return a.Driver.Query(labels)
}

func (a *absentRelease) Create(key string, rls *release.Release) error {
	a.created.Store(true)
	return a.Driver.Create(key, rls)
}

func annotateChart(c *chart.Chart, in Input) {
	if c.Metadata.Annotations == nil {
		c.Metadata.Annotations = map[string]string{}
	}
	c.Metadata.Annotations[fleet.BundleIDAnnotation] = in.BundleID
	c.Metadata.Annotations[DeploymentIDAnnotation] = in.DeploymentID
	c.Metadata.Annotations[SyncGenerationAnnotation] = strconv.FormatInt(in.Options.ForceSyncGeneration, 10)
	if in.Commit != "" {
		c.Metadata.Annotations[fleet.CommitAnnotation] = in.Commit
	}
}

// DownstreamLabel marks the Secrets and ConfigMaps an agent created from a bundle's
// downstreamResources, with the BundleDeployment's name.
const DownstreamLabel = "fleet.cattle.io/downstream-resource-of"

// applyDownstream creates or updates the bundle's downstreamResources in namespace ns.
func applyDownstream(ctx context.Context, kube kubernetes.Interface, ns, bundleID string, objs []metav1.Object) error {
	for _, o := range objs {
		o.SetNamespace(ns)
		labels := o.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[DownstreamLabel] = bundleID
		o.SetLabels(labels)
		var err error
		switch obj := o.(type) {
		case *corev1.Secret:
			err = createOrUpdate(ctx, kube.CoreV1().Secrets(ns), obj)
		case *corev1.ConfigMap:
			err = createOrUpdate(ctx, kube.CoreV1().ConfigMaps(ns), obj)
		default:
			err = fmt.Errorf("%T cannot be a downstream resource", o)
		}
		if err != nil {
			return fmt.Errorf("downstream resource %s/%s: %w", ns, o.GetName(), err)
		}
	}
	return nil
}

// namespacedClient is what createOrUpdate needs of a typed client (Secrets, ConfigMaps).
type namespacedClient[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
}

// createOrUpdate writes obj whole, over what exists under its name.
func createOrUpdate[T metav1.Object](ctx context.Context, c namespacedClient[T], obj T) error {
	cur, err := c.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = c.Create(ctx, obj, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	obj.SetResourceVersion(cur.GetResourceVersion())
	_, err = c.Update(ctx, obj, metav1.UpdateOptions{})
	return err
}

// ensureNamespace creates the release namespace when missing (unless createNamespace is false)
// and keeps namespaceLabels and namespaceAnnotations on it, writing as kube (the bundle's
// identity: a restricted bundle needs its ServiceAccount's right to create or label namespaces).
func ensureNamespace(ctx context.Context, read, kube kubernetes.Interface, name string, opts *fleet.BundleDeploymentOptions) (created bool, err error) {
	// Looked up as the agent (a namespace's labels are no secret, and a ServiceAccount may not
	// get namespaces), written as the bundle's identity.
	ns, err := read.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && opts.CreateNamespace != nil && !*opts.CreateNamespace {
		return false, fmt.Errorf("namespace %q does not exist, and createNamespace is false", name)
	}
	if apierrors.IsNotFound(err) {
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: opts.NamespaceLabels, Annotations: opts.NamespaceAnnotations}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, err
	}
	if err != nil {
		return false, err
	}
	changed := false
	ns = ns.DeepCopy()
	for k, v := range opts.NamespaceLabels {
		if ns.Labels[k] != v {
			if ns.Labels == nil {
				ns.Labels = map[string]string{}
			}
			ns.Labels[k], changed = v, true
		}
	}
	for k, v := range opts.NamespaceAnnotations {
		if ns.Annotations[k] != v {
			if ns.Annotations == nil {
				ns.Annotations = map[string]string{}
			}
			ns.Annotations[k], changed = v, true
		}
	}
	if !changed {
		return false, nil
	}
	_, err = kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{})
	return false, err
}

// Rollback re-applies the release's current revision, putting drifted resources back. Helm keeps
// at most maxHistory revisions (DefaultMaxHistory when 0). A failed rollback's revision stays in
// the history only with keepFailHistory (Fleet's correctDrift.keepFailHistory); otherwise it is
// removed and the revision rolled back to is the deployed one again, so failed corrections do
// not pile up.
func (d *Deployer) Rollback(ctx context.Context, r *Release, serviceAccount string, force, keepFailHistory bool, maxHistory int) (err error) {
	if err := d.acquire(ctx); err != nil {
		return err
	}
	defer d.release()
	defer d.memo.forget(r.Namespace + "/" + r.Name)
	sa, err := d.serviceAccount(ctx, serviceAccount)
	if err != nil {
		return err
	}
	ac, err := d.actionConfig(r.Namespace, sa)
	if err != nil {
		return err
	}
	e, err := d.verified(ctx, ac, r.Namespace, r.Name)
	if err != nil {
		return fmt.Errorf("rolling back: %w", err)
	}
	if last, err := ac.Releases.Last(r.Name); err == nil {
		if err := d.intend(ctx, *e, last); err != nil {
			return err
		}
	}
	defer func() {
		if lerr := d.writeLedger(ctx, ac, *e); lerr != nil {
			err = errors.Join(err, lerr)
		}
	}()
	rb := action.NewRollback(ac)
	rb.Version = r.Version
	rb.Force = force
	rb.MaxHistory = maxHistory
	if rb.MaxHistory <= 0 {
		rb.MaxHistory = DefaultMaxHistory
	}
	if err := rb.Run(r.Name); err != nil {
		err = fmt.Errorf("rolling back release %s: %w", r, err)
		if !keepFailHistory {
			if derr := dropFailedRollback(ac.Releases, r.Name, r.Version); derr != nil {
				return errors.Join(err, derr)
			}
		}
		return err
	}
	return nil
}

// dropFailedRollback removes the failed revision a rollback to version left as the newest of
// release name, and marks version deployed again.
func dropFailedRollback(store *storage.Storage, name string, version int) error {
	last, err := store.Last(name)
	if err != nil {
		return fmt.Errorf("reading release %s after a failed rollback: %w", name, err)
	}
	if last.Version <= version || last.Info == nil || last.Info.Status != release.StatusFailed {
		return nil
	}
	if _, err := store.Delete(name, last.Version); err != nil {
		return fmt.Errorf("removing failed rollback %s.v%d: %w", name, last.Version, err)
	}
	prev, err := store.Get(name, version)
	if err != nil {
		return fmt.Errorf("reading release %s.v%d: %w", name, version, err)
	}
	prev.Info.Status = release.StatusDeployed
	return store.Update(prev)
}

// Releases returns the releases this agent made, as its ledger records them, in every
// namespace; with a bundleID, only that BundleDeployment's. A Secret that merely looks like one
// of its releases is none of them.
func (d *Deployer) Releases(bundleID string) ([]*Release, error) {
	entries, err := d.ledgerEntries(context.Background(), bundleID)
	if err != nil {
		return nil, err
	}
	out := make([]*Release, 0, len(entries))
	for _, e := range entries {
		out = append(out, &Release{Name: e.Name, Namespace: e.Namespace, Version: e.Version, BundleID: e.BundleID,
			DeleteNamespace: e.DeleteNamespace && e.CreatedNamespace})
	}
	return out, nil
}

// Expected is a release a BundleDeployment of this cluster deploys.
type Expected struct {
	Namespace, Name, BundleID string
	DeleteNamespace           bool
	// ServiceAccount is the one the BundleDeployment names (the release is uninstalled as it).
	ServiceAccount string
}

// AdoptReleases enters into the ledger the releases of the BundleDeployments of this cluster
// that exist without an entry: made by a Fleet agent before the move, or by this agent before it
// kept a ledger. A release is adopted only when it is where a BundleDeployment of this cluster
// puts its release and says it belongs to that BundleDeployment (and to no other agent
// namespace); it is labelled as this agent labels its own. The namespace of an adopted release is
// never deleted with it: nothing says the agent created it. It returns how many it adopted.
func (d *Deployer) AdoptReleases(ctx context.Context, expected []Expected) (int, error) {
	adopted := 0
	var errs []error
	for _, x := range expected {
		if e, err := d.ledgerEntry(ctx, x.Namespace, x.Name); err != nil || e != nil {
			errs = append(errs, err)
			continue
		}
		ac, err := d.actionConfig(x.Namespace, "")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if sa, err := d.serviceAccount(ctx, x.ServiceAccount); err == nil {
			x.ServiceAccount = sa
		}
		rel, err := ac.Releases.Last(x.Name)
		if errors.Is(err, driver.ErrReleaseNotFound) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reading release %s/%s: %w", x.Namespace, x.Name, err))
			continue
		}
		agentNS := rel.Labels[AgentNamespaceLabel]
		if agentNS == "" && rel.Chart != nil && rel.Chart.Metadata != nil {
			agentNS = rel.Chart.Metadata.Annotations[fleet.AgentNamespaceAnnotation]
		}
		if owner(rel) != x.BundleID || (agentNS != "" && agentNS != d.agentNamespace) {
			continue
		}
		if rel.Labels[BundleIDLabel] != x.BundleID || rel.Labels[AgentNamespaceLabel] != d.agentNamespace {
			if rel.Labels == nil {
				rel.Labels = map[string]string{}
			}
			rel.Labels[BundleIDLabel], rel.Labels[AgentNamespaceLabel] = x.BundleID, d.agentNamespace
			if err := ac.Releases.Update(rel); err != nil {
				errs = append(errs, fmt.Errorf("labelling release %s/%s: %w", x.Namespace, x.Name, err))
				continue
			}
		}
		if err := d.writeLedger(ctx, ac, entry{Namespace: x.Namespace, Name: x.Name, BundleID: x.BundleID, DeleteNamespace: x.DeleteNamespace,
			ServiceAccount: x.ServiceAccount}); err != nil {
			errs = append(errs, err)
			continue
		}
		adopted++
	}
	return adopted, errors.Join(errs...)
}

func revision(s *corev1.Secret) int {
	v, _ := strconv.Atoi(s.Labels["version"])
	return v
}

// Uninstall removes a release. Resources annotated with helm.sh/resource-policy=keep
// (keepResources) stay. With deleteNamespace the release namespace goes too.
func (d *Deployer) Uninstall(ctx context.Context, r *Release) error {
	if err := d.acquire(ctx); err != nil {
		return err
	}
	defer d.release()
	defer d.memo.forget(r.Namespace + "/" + r.Name)
	// As the ServiceAccount the release was deployed as, and only a release of the ledger, from
	// the revision the agent wrote: no hook or deletion of a revision someone else wrote runs with
	// the agent's identity.
	recorded, err := d.ledgerEntry(ctx, r.Namespace, r.Name)
	if err != nil {
		return err
	}
	if recorded == nil {
		return fmt.Errorf("uninstalling release %s/%s: %w", r.Namespace, r.Name, errNotRecorded)
	}
	ac, err := d.actionConfig(r.Namespace, recorded.ServiceAccount)
	if err != nil {
		return err
	}
	e, err := d.verified(ctx, ac, r.Namespace, r.Name)
	if err != nil {
		return fmt.Errorf("uninstalling: %w", err)
	}
	as, err := d.clientAs(e.ServiceAccount)
	if err != nil {
		return err
	}
	un := action.NewUninstall(ac)
	un.IgnoreNotFound = true
	if _, err := un.Run(r.Name); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("uninstalling release %s/%s: %w", r.Namespace, r.Name, err)
	}
	// The namespace goes only when the bundle asked for it and the agent created it.
	if e.DeleteNamespace && e.CreatedNamespace && r.Namespace != "default" && !strings.HasPrefix(r.Namespace, "kube-") &&
		r.Namespace != d.agentNamespace {
		err := as.CoreV1().Namespaces().Delete(ctx, r.Namespace, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s of release %s: %w", r.Namespace, r.Name, err)
		}
	}
	return d.forgetLedger(ctx, r.Namespace, r.Name)
}

// Values are the Helm values to deploy with: helm.values, overridden by each valuesFrom source
// in order (read now, in this cluster), and a hash of the valuesFrom data ("" without any).
func (d *Deployer) Values(ctx context.Context, opts *fleet.BundleDeploymentOptions) (map[string]any, string, error) {
	values := map[string]any{}
	if opts.Helm == nil {
		return values, "", nil
	}
	if opts.Helm.Values != nil {
		values = opts.Helm.Values.DeepCopy().Data
		if values == nil {
			values = map[string]any{}
		}
	}
	if len(opts.Helm.ValuesFrom) == 0 {
		return values, "", nil
	}
	// Read as the bundle's ServiceAccount: a restricted bundle gets no Secret it could not read.
	as, _, err := d.bundleClient(ctx, opts.ServiceAccount)
	if err != nil {
		return nil, "", err
	}
	from, hash, err := readValuesFrom(ctx, as, opts.Helm.ValuesFrom, render.Namespace(opts))
	if err != nil {
		return nil, "", err
	}
	for _, v := range from {
		values = chartutil.MergeTables(v, values)
	}
	return values, hash, nil
}
