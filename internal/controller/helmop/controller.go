// Package helmop turns each HelmOp into a Bundle of the same name whose agents fetch the chart
// themselves: the manager resolves the version constraint against the chart source (a Helm
// repository, an OCI registry or a chart URL), polls it every pollingInterval so a new chart
// version rolls out without any commit, and rolls the Bundle's deployments up into the HelmOp's
// status. (manager)
package helmop

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"github.com/rancher/wrangler/v3/pkg/apply"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/rancher/wrangler/v3/pkg/relatedresource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/controller/index"
	"github.com/fleetgo/fleet/internal/policy"
	"github.com/fleetgo/fleet/internal/rancherca"
	"github.com/fleetgo/fleet/internal/secretuse"
	"github.com/fleetgo/fleet/internal/summary"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Conditions of a HelmOp besides Ready.
const (
	// ConditionAccepted is False while the spec cannot become a Bundle (the message says why).
	ConditionAccepted = "Accepted"
	// ConditionPolled is False while the chart source cannot be asked for versions.
	ConditionPolled = "Polled"
)

// Intervals.
const (
	// rollupDelay coalesces the roll-ups that changes of the Bundle and its deployments trigger.
	rollupDelay = time.Second
	// retryFirst is the wait after a failed poll; each further failure doubles it, up to
	// retryMax (and never past the polling interval).
	retryFirst = 5 * time.Second
	retryMax   = 5 * time.Minute
	// pollTimeout bounds one look at the chart source.
	pollTimeout = 2 * time.Minute
)

// bundleSet names the generating handler, and so the apply set of a HelmOp's Bundle.
const bundleSet = "fleet-helmop"

// Deps are what the controller reads and writes.
type Deps struct {
	HelmOps           fleetcontrollers.HelmOpController
	Bundles           fleetcontrollers.BundleController
	BundleDeployments fleetcontrollers.BundleDeploymentController
	// Secrets are read from their cache (helmSecretName).
	Secrets corecontrollers.SecretCache
	// Apply writes the Bundle (a set of Bundles only: the controller adds their cache).
	Apply apply.Apply
	// Policies are the namespaces' Policies (package policy); nil checks none.
	Policies fleetcontrollers.PolicyController
	// Guard refuses the Secrets a HelmOp may not name (package secretuse).
	Guard secretuse.Guard
}

type handler struct {
	Deps
	// ctx is the controller's: its end cancels chart lookups in flight.
	ctx context.Context
	now func() time.Time
	// mem is what the controller remembers between passes (memory.go).
	mem *memory
}

// Register starts turning HelmOps into Bundles.
func Register(ctx context.Context, d Deps) {
	h := &handler{Deps: d, ctx: ctx, now: time.Now, mem: newMemory()}
	fleetcontrollers.RegisterHelmOpGeneratingHandler(ctx, d.HelmOps, d.Apply.WithCacheTypes(d.Bundles), ConditionAccepted, bundleSet, h.generate, nil)
	d.HelmOps.OnChange(ctx, "helmop-memory", h.forgetDeleted)
	if d.Policies != nil {
		d.Policies.OnChange(ctx, "helmop-policies", index.RequeueNamespace[*fleet.Policy](d.HelmOps.Cache().List, d.HelmOps.Enqueue))
	}
	// A HelmOp's children name it by label; their bursts of changes make one roll-up.
	rollup := index.After{Queue: d.HelmOps, Delay: rollupDelay}
	relatedresource.Watch(ctx, "helmop-bundles", index.Parent("", fleet.HelmNameLabel), rollup, d.Bundles)
	relatedresource.Watch(ctx, "helmop-deployments", index.Parent(fleet.BundleNamespaceLabel, fleet.HelmNameLabel), rollup, d.BundleDeployments)
}

// forgetDeleted drops what memory holds of a deleted HelmOp.
func (h *handler) forgetDeleted(key string, op *fleet.HelmOp) (*fleet.HelmOp, error) {
	if op == nil {
		h.mem.forget(key)
	}
	return op, nil
}

// generate returns the HelmOp's Bundle, at the version its constraint resolves to, and its
// status. An invalid spec is an error: the generated handler keeps the Bundle as it is and says
// why in the Accepted condition. A chart source that cannot be polled keeps the version
// resolved before (and no Bundle when there was none).
func (h *handler) generate(op *fleet.HelmOp, status fleet.HelmOpStatus) ([]runtime.Object, fleet.HelmOpStatus, error) {
	ociRepo(op)
	if err := validate(op); err != nil {
		return nil, status, err
	}
	if h.Policies != nil {
		ps, err := h.Policies.Cache().List(op.Namespace, labels.Everything())
		if err != nil {
			return nil, status, err
		}
		if set := policy.Combine(ps); set.Any {
			// The defaults go into the Bundle, not the HelmOp (op is the handler's copy).
			if err := set.HelmOp(&op.Spec); err != nil {
				return nil, status, err
			}
		}
	}
	now := h.now()
	h.poll(op, &status, now)
	var objs []runtime.Object
	if status.Version != "" {
		b := bundle(op, status.Version)
		// Agents fetch the chart too: they trust what the manager does.
		if sec, err := h.helmSecret(op); err == nil {
			b.Spec.HelmOpOptions.CABundle, _ = h.rancherCA(op, sec)
		}
		objs = append(objs, b)
	}
	h.rollup(op, &status, now)
	return objs, status, nil
}

// ociRepo takes the form Fleet and the Rancher UI write for a chart in an OCI registry, the
// whole reference in helm.repo and no helm.chart, as helm.chart holding the reference (op is the
// handler's copy: the HelmOp keeps what its author wrote, its Bundle gets this).
func ociRepo(op *fleet.HelmOp) {
	if hl := op.Spec.Helm; hl != nil && hl.Chart == "" && strings.HasPrefix(hl.Repo, "oci://") {
		hl.Chart, hl.Repo = hl.Repo, ""
	}
}

// validate checks what the spec must say for a chart to be found.
func validate(op *fleet.HelmOp) error {
	hl := op.Spec.Helm
	if hl == nil || hl.Chart == "" {
		return fmt.Errorf("spec.helm.chart: name the chart (with spec.helm.repo), an oci:// reference or a chart URL")
	}
	if v := strings.TrimSpace(hl.Version); v != "" && v != "*" {
		if _, err := semver.NewConstraint(v); err != nil {
			return fmt.Errorf("spec.helm.version %q: not a version or version range: %v", hl.Version, err)
		}
	}
	if op.Spec.PollingInterval != nil && op.Spec.PollingInterval.Duration < 0 {
		return fmt.Errorf("spec.pollingInterval %s: must not be negative", op.Spec.PollingInterval.Duration)
	}
	return nil
}

// strict reports whether the version names exactly one version (nothing to poll for).
func strict(version string) bool {
	_, err := semver.StrictNewVersion(strings.TrimPrefix(strings.TrimSpace(version), "v"))
	return err == nil
}

// poll asks the chart source for the newest version the constraint allows when it is due: the
// first time, after the chart source or constraint changed, every pollingInterval for a version that can float, and
// after a failure (with backoff). It records the version, condition Polled and when it looked.
func (h *handler) poll(op *fleet.HelmOp, status *fleet.HelmOpStatus, now time.Time) {
	key := op.Namespace + "/" + op.Name
	interval := time.Duration(0)
	if op.Spec.PollingInterval != nil {
		interval = op.Spec.PollingInterval.Duration
	}
	floats := !strict(op.Spec.Helm.Version)
	sourceChanged := h.mem.sourceChanged(key, op)
	retryAt, failed := h.mem.retryAt(key)
	due := sourceChanged || (floats && interval > 0 && !now.Before(status.LastPollingTime.Add(interval)))
	if failed && !sourceChanged {
		due = !now.Before(retryAt)
		if !due {
			h.HelmOps.EnqueueAfter(op.Namespace, op.Name, retryAt.Sub(now))
			return
		}
	}
	if due {
		version, err := h.resolve(op)
		status.LastPollingTime = metav1.NewTime(now)
		if err != nil {
			fleet.SetCondition(&status.Conditions, ConditionPolled, corev1.ConditionFalse, "Error", err.Error(), now)
			h.HelmOps.EnqueueAfter(op.Namespace, op.Name, h.mem.pollFailed(key, now, interval))
			return
		}
		h.mem.resolvedFrom(key, op)
		status.Version = version
		fleet.SetCondition(&status.Conditions, ConditionPolled, corev1.ConditionTrue, "", "", now)
	}
	if floats && interval > 0 {
		h.HelmOps.EnqueueAfter(op.Namespace, op.Name, status.LastPollingTime.Add(interval).Sub(now))
	}
}

// resolve fetches the chart the spec names and returns the version the constraint resolved to.
func (h *handler) resolve(op *fleet.HelmOp) (string, error) {
	auth, cleanup, err := h.auth(op)
	defer cleanup()
	if err != nil {
		return "", err
	}
	parent := h.ctx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, pollTimeout)
	defer cancel()
	hl := op.Spec.Helm.DeepCopy()
	if strings.TrimSpace(hl.Version) == "*" {
		hl.Version = ""
	}
	_, version, err := bundlereader.FetchChart(ctx, hl, auth)
	if err != nil {
		return "", err
	}
	return version, nil
}

// auth reads helmSecretName (username, password, cacerts) for the chart source, and trusts
// Rancher's CA bundle when the Secret holds no CA (see rancherCA).
func (h *handler) auth(op *fleet.HelmOp) (bundlereader.ChartAuth, func(), error) {
	auth := bundlereader.ChartAuth{InsecureSkipTLSVerify: op.Spec.InsecureSkipTLSVerify, PlainHTTP: op.Spec.InsecureSkipTLSVerify}
	cleanup := func() {}
	s, err := h.helmSecret(op)
	if err != nil {
		return auth, cleanup, err
	}
	var ca []byte
	if s != nil {
		auth.Username, auth.Password, ca = string(s.Data["username"]), string(s.Data["password"]), s.Data["cacerts"]
	}
	if len(ca) == 0 {
		if ca, err = h.rancherCA(op, s); err != nil {
			return auth, cleanup, err
		}
	}
	cleanup, err = auth.TrustCA(ca)
	return auth, cleanup, err
}

// helmSecret is the HelmOp's helmSecretName Secret (nil when it names none), unless the guard
// refuses it.
func (h *handler) helmSecret(op *fleet.HelmOp) (*corev1.Secret, error) {
	if op.Spec.HelmSecretName == "" {
		return nil, nil
	}
	s, err := h.Secrets.Get(op.Namespace, op.Spec.HelmSecretName)
	if err != nil {
		return nil, fmt.Errorf("spec.helmSecretName %s: %w", op.Spec.HelmSecretName, err)
	}
	if err := h.Guard.Check(s, "spec.helmSecretName"); err != nil {
		return nil, err
	}
	return s, nil
}

// rancherCA is Rancher's CA bundle (package rancherca) when the HelmOp trusts it, as on Fleet:
// it checks certificates and its helmSecretName Secret s (nil for none) holds no cacerts.
func (h *handler) rancherCA(op *fleet.HelmOp, s *corev1.Secret) ([]byte, error) {
	if (s != nil && len(s.Data["cacerts"]) > 0) || op.Spec.InsecureSkipTLSVerify || h.Secrets == nil {
		return nil, nil
	}
	return rancherca.Bundle(h.Secrets.Get)
}

// bundle is the HelmOp's Bundle: its spec with the resolved version, labelled with the HelmOp's
// name and labels, telling agents where to fetch the chart.
func bundle(op *fleet.HelmOp, version string) *fleet.Bundle {
	spec := *op.Spec.BundleSpec.DeepCopy()
	spec.Helm.Version = version
	opts := &fleet.BundleHelmOptions{SecretName: op.Spec.HelmSecretName, InsecureSkipTLSVerify: op.Spec.InsecureSkipTLSVerify}
	spec.HelmOpOptions = opts
	labels := map[string]string{}
	for k, v := range op.Spec.Labels {
		labels[k] = v
	}
	labels[fleet.HelmNameLabel] = op.Name
	// The Bundle (and its BundleDeployments) belong to the HelmOp's shard, whatever spec.labels
	// say: the shard that handles the HelmOp is the one that handles its Bundle.
	delete(labels, fleet.ShardLabel)
	if shard := op.Labels[fleet.ShardLabel]; shard != "" {
		labels[fleet.ShardLabel] = shard
	}
	if len(spec.Targets) == 0 {
		// Targeted nowhere at all: the namespace's default ClusterGroup, as for a GitRepo.
		spec.Targets = []fleet.BundleTarget{{Name: "default", ClusterGroup: fleet.DefaultClusterGroup}}
	}
	return &fleet.Bundle{
		TypeMeta:   metav1.TypeMeta{APIVersion: fleet.SchemeGroupVersion.String(), Kind: "Bundle"},
		ObjectMeta: metav1.ObjectMeta{Name: op.Name, Namespace: op.Namespace, Labels: labels},
		Spec:       spec,
	}
}

// source is what the version was resolved from: a change of any part resolves it again.
func source(op *fleet.HelmOp) string {
	hl := op.Spec.Helm
	return fmt.Sprint(hl.Repo, "|", hl.Chart, "|", hl.Version, "|", op.Spec.HelmSecretName, "|", op.Spec.InsecureSkipTLSVerify)
}

// rollup fills the status from the HelmOp's Bundle and its BundleDeployments.
func (h *handler) rollup(op *fleet.HelmOp, status *fleet.HelmOpStatus, now time.Time) {
	b, err := h.Bundles.Cache().Get(op.Namespace, op.Name)
	if err != nil || b.Labels[fleet.HelmNameLabel] != op.Name {
		b = nil
	}
	bds, _ := h.BundleDeployments.Cache().GetByIndex(index.ByBundle, op.Namespace+"/"+op.Name)
	var counts fleet.ResourceCounts
	perCluster := map[string]*fleet.ResourceCounts{}
	var deployments []summary.Deployment
	var keys []fleet.ResourceKey
	if b != nil {
		keys = b.Status.ResourceKey
	}
	status.ReadyClusters, status.DesiredReadyClusters = 0, len(bds)
	for _, bd := range bds {
		if summary.State(bd) == fleet.Ready {
			status.ReadyClusters++
		}
		deployments = append(deployments, summary.Deployment{BD: bd, Keys: keys,
			Cluster: bd.Labels[fleet.ClusterNamespaceLabel] + "/" + bd.Labels[fleet.ClusterLabel]})
		if rc := bd.Status.ResourceCounts; rc != nil {
			summary.AddCounts(&counts, *rc)
			c := *rc
			perCluster[bd.Labels[fleet.ClusterNamespaceLabel]+"/"+bd.Labels[fleet.ClusterLabel]] = &c
		}
	}
	status.Resources = summary.Resources(deployments)
	status.ResourceCounts, status.PerClusterResourceCounts = counts, nil
	if len(perCluster) > 0 {
		status.PerClusterResourceCounts = perCluster
	}
	status.Summary = fleet.BundleSummary{}
	if b != nil {
		status.Summary = b.Status.Summary
	}
	s := status.Summary
	status.Display.ReadyBundleDeployments = fmt.Sprintf("%d/%d", s.Ready, s.DesiredReady)
	ready, msg := readiness(status, b)
	// The state is empty when ready, as Fleet writes it: Rancher shows such a HelmOp Active.
	status.Display.State, status.Display.Error, status.Display.Message = "", false, ""
	if ready != corev1.ConditionTrue {
		status.Display.State = string(summary.WorstState(s))
		if status.Display.State == "" || status.Display.State == string(fleet.Ready) {
			status.Display.State = "NotReady"
		}
		status.Display.Error, status.Display.Message = ready == corev1.ConditionFalse, msg
	}
	fleet.SetCondition(&status.Conditions, fleet.ConditionReady, ready, summary.ReadyReason(ready, status.Display.State), msg, now)
	if b != nil {
		if st, reason, msg, ok := summary.Rollout([]*fleet.Bundle{b}); ok {
			fleet.SetCondition(&status.Conditions, fleet.ConditionRollout, st, reason, msg, now)
		}
		summary.SetHeld(&status.Conditions, []*fleet.Bundle{b}, now)
	}
}

// readiness is the HelmOp's Ready condition: a chart source that cannot be polled, no version
// yet, then its Bundle's.
func readiness(status *fleet.HelmOpStatus, b *fleet.Bundle) (corev1.ConditionStatus, string) {
	if c := fleet.FindCondition(status.Conditions, ConditionPolled); c != nil && c.Status == corev1.ConditionFalse {
		return corev1.ConditionFalse, c.Message
	}
	if status.Version == "" || b == nil {
		return corev1.ConditionUnknown, "no chart version resolved yet"
	}
	if c := fleet.FindCondition(b.Status.Conditions, fleet.ConditionReady); c != nil {
		return c.Status, c.Message
	}
	return corev1.ConditionUnknown, "the Bundle is not rolled out yet"
}
