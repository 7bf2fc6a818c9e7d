package helmdeployer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/fleetgo/fleet/internal/helmrelease"
	"github.com/fleetgo/fleet/internal/metrics"
	"github.com/fleetgo/fleet/internal/render"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

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
		return nil, helmrelease.Permanent(err)
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
	// Helm acts from last and writes the next revision through storage that records it first.
	if v, ok := ac.Releases.Driver.(*vouched); ok {
		v.e = mine
	} else {
		ac.Releases.Driver = d.vouch(ctx, ac.Releases.Driver, mine, last)
	}
	rel, err := d.act(ctx, run, c, in.Values, last, mine)
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

// act installs (no last revision) or upgrades, and records in the ledger whatever revision the
// action left: a failed one, an atomic rollback's, it is the agent's either way.
func (d *Deployer) act(ctx context.Context, run *helmRun, c *chart.Chart, values map[string]any, last *release.Release, mine entry) (*release.Release, error) {
	started := time.Now()
	var rel *release.Release
	var err error
	if last == nil {
		rel, err = run.install(ctx, c, values)
	} else {
		rel, err = run.upgrade(ctx, c, values)
	}
	metrics.Deployed(last == nil, time.Since(started))
	if run.post.ignored != nil {
		mine.IgnoredRendered = run.post.ignored.renderedJSON()
	}
	if lerr := d.writeLedger(ctx, run.ac, mine); lerr != nil {
		err = errors.Join(err, lerr)
	}
	return rel, err
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
	if err := applyDownstream(ctx, as, ns, in.BundleID, opts.KeepResources, in.Downstream); err != nil {
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
	e, recorded, err := d.verified(ctx, ac, ns, name)
	switch {
	case errors.Is(err, errNotRecorded) && !takeOwnership:
		return nil, helmrelease.Permanent(fmt.Errorf("release %s/%s exists and this agent did not make it (set helm.takeOwnership to adopt it)", ns, name))
	case errors.Is(err, errNotRecorded):
		// Taken over as the bundle asks: its newest revision is the one to act from.
		ac.Releases.Driver = d.vouch(ctx, ac.Releases.Driver, entry{Namespace: ns, Name: name, BundleID: bundleID}, last)
	case err != nil:
		return nil, err
	case e.BundleID != bundleID && !takeOwnership:
		return nil, helmrelease.Permanent(fmt.Errorf("release %s/%s belongs to %q, not to this bundle (set helm.takeOwnership to adopt it)", ns, name, e.BundleID))
	case recorded == nil:
		return nil, nil
	default:
		// Revisions someone else wrote are gone: the agent's own newest is the one it verified.
		last = recorded
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
