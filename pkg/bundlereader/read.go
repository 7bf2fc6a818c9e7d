package bundlereader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/names"
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
	// Targets are the GitRepo's targets (from the targets file). They follow each bundle's
	// targetCustomizations and also become its target restrictions.
	Targets []fleet.GitTarget
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
}

// Read turns the folders under root selected by paths into Bundles. It validates every bundle
// before returning any: one broken folder fails the whole run, so nothing is written.
func Read(root string, paths []string, o Options) ([]*fleet.Bundle, error) {
	return ReadContext(context.Background(), root, paths, o)
}

// ReadContext is Read bounded by ctx: downloads of charts (repositories, OCI, git) stop when it
// ends, and the error says which chart was being fetched.
func ReadContext(ctx context.Context, root string, paths []string, o Options) ([]*fleet.Bundle, error) {
	dirs, err := Discover(root, paths)
	if err != nil {
		return nil, err
	}
	var bundles []*fleet.Bundle
	var errs []error
	seen := map[string]string{}
	for _, d := range dirs {
		b, err := readBundle(ctx, root, d, dirs, o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if other, dup := seen[b.Name]; dup {
			errs = append(errs, fmt.Errorf("%s and %s both make bundle %q: give one of them another name in fleet.yaml", other, displayPath(d), b.Name))
			continue
		}
		seen[b.Name] = displayPath(d)
		bundles = append(bundles, b)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return bundles, nil
}

func displayPath(d BundleDir) string {
	if d.FleetYAML != "" {
		return d.FleetYAML
	}
	return d.Path
}

func readBundle(ctx context.Context, root string, d BundleDir, all []BundleDir, o Options) (*fleet.Bundle, error) {
	fy := &fleet.FleetYAML{}
	if d.FleetYAML != "" {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(d.FleetYAML)))
		if err != nil {
			return nil, err
		}
		if err := decodeStrict(d.FleetYAML, data, fy); err != nil {
			return nil, err
		}
	}
	file := displayPath(d)
	name := fy.Name
	if name == "" {
		name = names.BundleName(o.Name, d.Path)
	}
	if err := validate(file, name, fy); err != nil {
		return nil, err
	}
	files, err := ReadFiles(root, d, all)
	if err != nil {
		return nil, err
	}
	dirAbs := filepath.Join(root, filepath.FromSlash(d.Path))

	spec := fy.BundleSpec.DeepCopy()
	if h := spec.Helm; (h == nil || h.Chart == "") && chartMissingDependencies(dirAbs) {
		// A bundle folder that is a chart, declaring dependencies it does not carry: they are
		// fetched and the chart packaged, as for a helm.chart naming a folder.
		if spec.Helm == nil {
			spec.Helm = &fleet.HelmOptions{}
		}
		spec.Helm.Chart = "."
	}
	auth := o.ChartAuth
	if a, ok := o.ChartAuthByPath[d.Path]; ok {
		auth = a
	} else if a, ok := o.ChartAuthByPath[strings.TrimPrefix(d.Path, "./")]; ok {
		auth = a
	}
	// A chart named by fleet.yaml, or the bundle folder itself: values (files) mean something.
	_, statErr := os.Stat(filepath.Join(dirAbs, "Chart.yaml"))
	hasChart := (spec.Helm != nil && spec.Helm.Chart != "") || statErr == nil
	extra, err := prepareOptions(ctx, file, root, dirAbs, hasChart, &spec.BundleDeploymentOptions, auth)
	if err != nil {
		return nil, err
	}
	targets := make([]fleet.BundleTarget, 0, len(fy.TargetCustomizations)+len(o.Targets))
	for i := range fy.TargetCustomizations {
		t := fy.TargetCustomizations[i].DeepCopy()
		more, err := prepareOptions(ctx, fmt.Sprintf("%s: targetCustomizations[%d]", file, i), root, dirAbs, hasChart, &t.BundleDeploymentOptions, auth)
		if err != nil {
			return nil, err
		}
		extra = append(extra, more...)
		targets = append(targets, *t)
	}
	gitTargets := o.Targets
	if len(fy.OverrideTargets) > 0 {
		gitTargets = fy.OverrideTargets
	}
	var restrictions []fleet.BundleTargetRestriction
	for _, t := range gitTargets {
		targets = append(targets, fleet.BundleTarget{
			Name: t.Name, ClusterName: t.ClusterName, ClusterSelector: t.ClusterSelector,
			ClusterGroup: t.ClusterGroup, ClusterGroupSelector: t.ClusterGroupSelector,
		})
		restrictions = append(restrictions, fleet.BundleTargetRestriction{
			Name: t.Name, ClusterName: t.ClusterName, ClusterSelector: t.ClusterSelector,
			ClusterGroup: t.ClusterGroup, ClusterGroupSelector: t.ClusterGroupSelector,
		})
	}
	spec.Targets = targets
	spec.TargetRestrictions = restrictions
	applyRepoSettings(spec, o)

	resources, err := ToResources(append(dropValuesFiles(files, fy), extra...))
	if err != nil {
		return nil, err
	}
	spec.Resources = resources

	b := &fleet.Bundle{
		TypeMeta:   metav1.TypeMeta{APIVersion: "fleet.cattle.io/v1alpha1", Kind: "Bundle"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: bundleLabels(fy, o)},
		Spec:       *spec,
	}
	return b, nil
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
