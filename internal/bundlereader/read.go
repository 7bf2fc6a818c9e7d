package bundlereader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Options describe one apply run: where the bundles come from and what every bundle gets.
type Options struct {
	// Name is the GitRepo's name (fleet apply's NAME); bundle names start with it.
	Name string
	// Namespace is where the Bundles go.
	Namespace string
	// Commit is the git commit the checkout is at; it labels every Bundle.
	Commit string
	// Labels are added to every Bundle.
	Labels map[string]string
	// Targets follow each bundle's own targets and targetCustomizations, and TargetRestrictions
	// are added to its restrictions: they come from the targets file, which holds the GitRepo's
	// targets as both (see FromGitTargets). A fleet.yaml's overrideTargets replace both.
	Targets            []fleet.BundleTarget
	TargetRestrictions []fleet.BundleTargetRestriction
	// ServiceAccount, TargetNamespace, Paused, KeepResources, DeleteNamespace and CorrectDrift
	// are the GitRepo's settings, applied to every bundle.
	ServiceAccount  string
	TargetNamespace string
	// AllowedTargetNamespaceSelector, from the namespace's GitRepoRestrictions, limits every
	// bundle to downstream namespaces whose labels match; agents enforce it.
	AllowedTargetNamespaceSelector *metav1.LabelSelector
	Paused                         bool
	KeepResources                  bool
	DeleteNamespace                bool
	CorrectDrift                   *fleet.CorrectDrift
	// ChartAuth is used for every chart download, unless ChartAuthByPath has the bundle's
	// folder (relative to the root, forward slashes, as the GitRepo's helmSecretNameForPaths
	// lists them).
	ChartAuth       ChartAuth
	ChartAuthByPath map[string]ChartAuth
	// Scan changes which folders are bundles (fleet apply -b, --driven-scan).
	Scan ScanOptions
	// SyncGeneration, when not 0, is every bundle's forceSyncGeneration (fleet apply
	// --sync-generation, a GitRepo's forceSyncGeneration): raising it redeploys.
	SyncGeneration int64
	// Compress stores every resource gzipped and base64-encoded (fleet apply -c), not only
	// large or binary ones.
	Compress bool
	// ImageScanInterval, when set, is the interval of the ImageScans fleet.yaml declares
	// without one (a GitRepo's imageScanInterval).
	ImageScanInterval time.Duration
	// MaxConcurrency bundles are read at once (chart downloads included); 0 means 4.
	MaxConcurrency int
	// Log, when set, gets a line for each folder of manifests without fleet.yaml whose files
	// went into another folder's bundle.
	Log io.Writer
	// KeepGoing reads every folder it can: one that fails is listed in Result.Failed instead of
	// failing the whole read (fleet plan reports each bundle's error and plans the others).
	KeepGoing bool
}

// DefaultMaxConcurrency is how many bundles are read at once unless Options say otherwise.
const DefaultMaxConcurrency = 4

// Read turns the folders under root selected by paths into Bundles. It validates every bundle
// before returning any: one broken folder fails the whole run, so nothing is written.
func Read(root string, paths []string, o Options) ([]*fleet.Bundle, error) {
	return ReadContext(context.Background(), root, paths, o)
}

// ReadContext is Read bounded by ctx: downloads of charts (repositories, OCI, git) stop when it
// ends, and the error says which chart was being fetched.
func ReadContext(ctx context.Context, root string, paths []string, o Options) ([]*fleet.Bundle, error) {
	r, err := ReadAll(ctx, root, paths, o)
	return r.Bundles, err
}

// Result is what a checkout's bundle folders declare: Bundles, and the ImageScans of their
// fleet.yaml files (imageScans[]).
type Result struct {
	Bundles    []*fleet.Bundle
	ImageScans []*fleet.ImageScan
	// Failed are the folders that could not be read, with KeepGoing.
	Failed []FolderError
}

// FolderError is a bundle folder that could not be read.
type FolderError struct {
	Folder string
	Err    error
}

// ReadAll is ReadContext with the ImageScans the folders declare.
func ReadAll(ctx context.Context, root string, paths []string, o Options) (Result, error) {
	dirs, err := DiscoverWith(root, paths, o.Scan)
	if err != nil {
		return Result{}, err
	}
	results := make([]readResult, len(dirs))
	limit := o.MaxConcurrency
	if limit <= 0 {
		limit = DefaultMaxConcurrency
	}
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i, d := range dirs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r := &results[i]
			r.b, r.loose, r.err = readBundle(ctx, root, d, dirs, o)
			if r.err == nil {
				r.scans, r.err = imageScans(root, d, r.b.Name, o)
			}
		}()
	}
	wg.Wait()
	return collect(dirs, results, o)
}

// readResult is one folder's read.
type readResult struct {
	b     *fleet.Bundle
	scans []*fleet.ImageScan
	loose []string
	err   error
}

// collect joins the folders' reads into the Result, in folder order: a bundle name made twice,
// or (without KeepGoing) any folder that failed, fails the whole read.
func collect(dirs []BundleDir, results []readResult, o Options) (Result, error) {
	var res Result
	var errs []error
	seen := map[string]string{}
	for i, d := range dirs {
		b, err := results[i].b, results[i].err
		if err != nil && o.KeepGoing {
			res.Failed = append(res.Failed, FolderError{Folder: displayPath(d), Err: err})
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if o.Log != nil {
			for _, l := range results[i].loose {
				fmt.Fprintf(o.Log, "folder %s has no fleet.yaml: its manifests are part of bundle %s (folder %s)\n", l, b.Name, d.Path)
			}
		}
		if other, dup := seen[b.Name]; dup {
			errs = append(errs, fmt.Errorf("%s and %s both make bundle %q: give one of them another name in fleet.yaml", other, displayPath(d), b.Name))
			continue
		}
		seen[b.Name] = displayPath(d)
		res.Bundles = append(res.Bundles, b)
		res.ImageScans = append(res.ImageScans, results[i].scans...)
	}
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	return res, nil
}

func displayPath(d BundleDir) string {
	if d.FleetYAML != "" {
		return d.FleetYAML
	}
	return d.Path
}

func readBundle(ctx context.Context, root string, d BundleDir, all []BundleDir, o Options) (*fleet.Bundle, []string, error) {
	fy, err := readFleetYAML(root, d)
	if err != nil {
		return nil, nil, err
	}
	file := displayPath(d)
	name := fy.Name
	if name == "" {
		name = names.BundleName(o.Name, path.Join(d.Path, d.OptionsName))
	}
	if err := validate(file, name, fy); err != nil {
		return nil, nil, err
	}
	files, err := ReadFiles(root, d, all)
	if err != nil {
		return nil, nil, err
	}
	dirAbs := filepath.Join(root, filepath.FromSlash(d.Path))
	spec, hasChart, folderIsChart := chartOf(root, dirAbs, fy)
	p := optionsReader{ctx: ctx, file: file, root: root, dir: dirAbs, hasChart: hasChart, auth: chartAuthFor(d, o)}
	extra, err := p.prepare(file, &spec.BundleDeploymentOptions)
	if err != nil {
		return nil, nil, err
	}
	more, err := p.targets(spec, fy, o)
	if err != nil {
		return nil, nil, err
	}
	applyRepoSettings(spec, o)
	if err := checkContent(d.Path, files, folderIsChart); err != nil {
		return nil, nil, err
	}
	if o.SyncGeneration != 0 {
		spec.ForceSyncGeneration = o.SyncGeneration
	}
	if spec.Resources, err = toResources(append(dropValuesFiles(files, fy), append(extra, more...)...), o.Compress); err != nil {
		return nil, nil, err
	}
	b := &fleet.Bundle{
		TypeMeta:   metav1.TypeMeta{APIVersion: "fleet.cattle.io/v1alpha1", Kind: "Bundle"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: bundleLabels(fy, o)},
		Spec:       *spec,
	}
	var loose []string
	_, kerr := os.Stat(filepath.Join(dirAbs, "kustomization.yaml"))
	if !hasChart && spec.Kustomize == nil && kerr != nil {
		loose = looseFolders(d, files)
	}
	return b, loose, nil
}

// chartOf is the bundle's spec as fleet.yaml gives it, with the folder itself as the chart when
// it is one declaring dependencies it does not carry (they are fetched and the chart packaged, as
// for a helm.chart naming a folder). hasChart: a chart named by fleet.yaml, or the bundle folder
// itself (values files mean something); folderIsChart: the folder is the chart as it is (a
// helm.chart folder is loaded when it is packaged).
func chartOf(root, dirAbs string, fy *fleet.FleetYAML) (spec *fleet.BundleSpec, hasChart, folderIsChart bool) {
	spec = fy.BundleSpec.DeepCopy()
	if h := spec.Helm; (h == nil || h.Chart == "") && chartMissingDependencies(root, dirAbs) {
		if spec.Helm == nil {
			spec.Helm = &fleet.HelmOptions{}
		}
		spec.Helm.Chart = "."
	}
	_, statErr := os.Stat(filepath.Join(dirAbs, "Chart.yaml"))
	hasChart = (spec.Helm != nil && spec.Helm.Chart != "") || statErr == nil
	folderIsChart = statErr == nil && (spec.Helm == nil || spec.Helm.Chart == "")
	return spec, hasChart, folderIsChart
}

// readFleetYAML reads the bundle folder's options file, refusing unknown fields.
func readFleetYAML(root string, d BundleDir) (*fleet.FleetYAML, error) {
	fy := &fleet.FleetYAML{}
	if d.FleetYAML == "" {
		return fy, nil
	}
	// Through os.Root: a fleet.yaml that is a symlink out of the checkout is not read.
	data, err := readWithin(root, d.FleetYAML)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.FleetYAML, err)
	}
	if err := decodeStrict(d.FleetYAML, data, fy); err != nil {
		return nil, err
	}
	return fy, nil
}

// chartAuthFor is the chart credentials of the bundle folder: its own, else the run's. The
// git server's CAs (GitCABundle) are the run's for every folder.
func chartAuthFor(d BundleDir, o Options) ChartAuth {
	for _, p := range []string{d.Path, strings.TrimPrefix(d.Path, "./")} {
		if a, ok := o.ChartAuthByPath[p]; ok {
			a.GitCABundle = o.ChartAuth.GitCABundle
			return a
		}
	}
	return o.ChartAuth
}

// optionsReader prepares the deployment options of one bundle folder (prepareOptions).
type optionsReader struct {
	ctx       context.Context
	file      string
	root, dir string
	hasChart  bool
	auth      ChartAuth
}

func (p optionsReader) prepare(where string, opts *fleet.BundleDeploymentOptions) ([]File, error) {
	return prepareOptions(p.ctx, where, p.root, p.dir, p.hasChart, opts, p.auth)
}

// targets sets the Bundle's targets: fleet.yaml's own come first, then its
// targetCustomizations, then the GitRepo's (or fleet.yaml's overrideTargets); none at all means
// the namespace's default ClusterGroup, as in Fleet. It returns the files their options added.
func (p optionsReader) targets(spec *fleet.BundleSpec, fy *fleet.FleetYAML, o Options) ([]File, error) {
	var targets []fleet.BundleTarget
	var extra []File
	for _, own := range []struct {
		key  string
		list []fleet.BundleTarget
	}{{"targets", fy.Targets}, {"targetCustomizations", fy.TargetCustomizations}} {
		for i := range own.list {
			t := own.list[i].DeepCopy()
			more, err := p.prepare(fmt.Sprintf("%s: %s[%d]", p.file, own.key, i), &t.BundleDeploymentOptions)
			if err != nil {
				return nil, err
			}
			extra = append(extra, more...)
			targets = append(targets, *t)
		}
	}
	repoTargets, restrictions := o.Targets, o.TargetRestrictions
	if len(fy.OverrideTargets) > 0 {
		repoTargets, restrictions = FromGitTargets(fy.OverrideTargets)
	}
	targets = append(targets, repoTargets...)
	if len(targets) == 0 {
		targets = []fleet.BundleTarget{{Name: "default", ClusterGroup: fleet.DefaultClusterGroup}}
	}
	spec.Targets = targets
	spec.TargetRestrictions = append([]fleet.BundleTargetRestriction(nil), restrictions...)
	return extra, nil
}

// FromGitTargets turns a GitRepo's targets into bundle targets and the same restrictions:
// bundles then reach only clusters the GitRepo targets, whatever their fleet.yaml says.
func FromGitTargets(gts []fleet.GitTarget) ([]fleet.BundleTarget, []fleet.BundleTargetRestriction) {
	var targets []fleet.BundleTarget
	var restrictions []fleet.BundleTargetRestriction
	for _, t := range gts {
		targets = append(targets, fleet.BundleTarget{
			Name: t.Name, ClusterName: t.ClusterName, ClusterSelector: t.ClusterSelector,
			ClusterGroup: t.ClusterGroup, ClusterGroupSelector: t.ClusterGroupSelector,
		})
		restrictions = append(restrictions, fleet.BundleTargetRestriction{
			Name: t.Name, ClusterName: t.ClusterName, ClusterSelector: t.ClusterSelector,
			ClusterGroup: t.ClusterGroup, ClusterGroupSelector: t.ClusterGroupSelector,
		})
	}
	return targets, restrictions
}

// applyRepoSettings applies the GitRepo's settings. Those that bound what a repository may do
// (serviceAccount, targetNamespace, allowedTargetNamespaceSelector: set by the GitRepo or its
// namespace's GitRepoRestrictions) override fleet.yaml and every targetCustomization; for the
// others a bundle's own fleet.yaml wins where both set a value.
func applyRepoSettings(spec *fleet.BundleSpec, o Options) {
	opts := &spec.BundleDeploymentOptions
	if o.ServiceAccount != "" {
		// Otherwise a repository could deploy as any account of the downstream cluster,
		// the agent's own included.
		opts.ServiceAccount = o.ServiceAccount
		for i := range spec.Targets {
			spec.Targets[i].ServiceAccount = ""
		}
	}
	if o.AllowedTargetNamespaceSelector != nil {
		opts.AllowedTargetNamespaceSelector = o.AllowedTargetNamespaceSelector.DeepCopy()
		for i := range spec.Targets {
			spec.Targets[i].AllowedTargetNamespaceSelector = nil
		}
	}
	if o.TargetNamespace != "" {
		// The GitRepo's targetNamespace is a restriction, so it overrides fleet.yaml and the
		// targetCustomizations alike.
		opts.TargetNamespace = o.TargetNamespace
		for i := range spec.Targets {
			spec.Targets[i].TargetNamespace = ""
		}
	}
	spec.Paused = spec.Paused || o.Paused
	opts.KeepResources = opts.KeepResources || o.KeepResources
	opts.DeleteNamespace = opts.DeleteNamespace || o.DeleteNamespace
	if opts.CorrectDrift == nil && o.CorrectDrift != nil {
		opts.CorrectDrift = o.CorrectDrift.DeepCopy()
	}
}

func bundleLabels(fy *fleet.FleetYAML, o Options) map[string]string {
	out := map[string]string{}
	for k, v := range fy.Labels {
		out[k] = v
	}
	for k, v := range o.Labels {
		out[k] = v
	}
	if o.Name != "" {
		out[fleet.RepoLabel] = o.Name
	}
	if o.Commit != "" {
		out[fleet.CommitLabel] = o.Commit
	}
	return out
}

// dropValuesFiles leaves out the values files fleet.yaml names: apply merges them into
// helm.values, so agents never need them.
func dropValuesFiles(files []File, fy *fleet.FleetYAML) []File {
	drop := map[string]bool{}
	mark := func(h *fleet.HelmOptions) {
		if h == nil {
			return
		}
		for _, f := range h.ValuesFiles {
			drop[path.Clean(filepath.ToSlash(f))] = true
		}
	}
	mark(fy.Helm)
	for i := range fy.Targets {
		mark(fy.Targets[i].Helm)
	}
	for i := range fy.TargetCustomizations {
		mark(fy.TargetCustomizations[i].Helm)
	}
	out := files[:0:0]
	for _, f := range files {
		if !drop[f.Name] {
			out = append(out, f)
		}
	}
	return out
}
