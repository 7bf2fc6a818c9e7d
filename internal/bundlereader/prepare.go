package bundlereader

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/sopsfile"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// prepareOptions makes one set of options self-contained: values files are merged into
// helm.values, charts from outside the folder are downloaded or packaged and returned as extra
// files, and every path the options name is checked: values files, kustomize.dir and overlays
// must lie inside the bundle folder dir, a local chart inside the checkout repo, by their text
// and through any symlink. where names the options in errors.
func prepareOptions(ctx context.Context, where, repo, dir string, hasChart bool, o *fleet.BundleDeploymentOptions, auth ChartAuth) ([]File, error) {
	bad := func(key, format string, args ...any) error {
		return &InputError{File: where, Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	if o.Kustomize != nil && o.Kustomize.Dir != "" {
		st, err := statWithin(dir, dir, o.Kustomize.Dir, "bundle folder")
		if err != nil {
			return nil, bad("kustomize.dir", "%v", err)
		}
		if !st.IsDir() {
			return nil, bad("kustomize.dir", "%q is not a folder", o.Kustomize.Dir)
		}
	}
	if o.YAML != nil {
		for i, ov := range o.YAML.Overlays {
			st, err := statWithin(dir, dir, path.Join("overlays", ov), "bundle folder")
			if err != nil || !st.IsDir() {
				if errors.Is(err, errOutside) {
					return nil, bad(fmt.Sprintf("yaml.overlays[%d]", i), "%v", err)
				}
				return nil, bad(fmt.Sprintf("yaml.overlays[%d]", i), "overlay %q not found: expected folder overlays/%s", ov, ov)
			}
		}
	}
	h := o.Helm
	if h == nil {
		return nil, nil
	}
	if err := mergeValuesFiles(bad, dir, hasChart, h); err != nil {
		return nil, err
	}
	if h.Chart != "" && !isRemoteChart(h) && !strings.HasPrefix(h.Chart, "git::") {
		if _, err := statWithin(repo, dir, h.Chart, "checkout"); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, bad("helm.chart", "%v", err)
		}
	}
	switch {
	case isRemoteChart(h):
		c, err := fetchChart(ctx, h, auth)
		if err != nil {
			return nil, bad("helm.chart", "%v", err)
		}
		h.Chart, h.Repo, h.Version = c.Name, "", c.Version
		return []File{{Name: c.Name, Content: c.Data}}, nil
	case strings.HasPrefix(h.Chart, "git::"):
		c, err := fetchGitChart(ctx, h.Chart, !h.DisableDependencyUpdate, auth)
		if err != nil {
			return nil, bad("helm.chart", "%v", err)
		}
		h.Chart, h.Version = c.Name, c.Version
		return []File{{Name: c.Name, Content: c.Data}}, nil
	case h.Chart != "":
		return prepareLocalChart(ctx, bad, repo, dir, h, auth)
	}
	return nil, nil
}

// chartMissingDependencies reports whether dir is a chart whose Chart.yaml declares dependencies
// its charts/ folder lacks, or one with a symlink out of the checkout repo (which packaging it
// then refuses, naming the link, before the loader follows it).
func chartMissingDependencies(repo, dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		return false
	}
	if checkWithin(repo, dir) != nil {
		return true
	}
	c, err := loader.LoadDir(dir)
	return err == nil && len(c.Metadata.Dependencies) > 0 && action.CheckDependencies(c, c.Metadata.Dependencies) != nil
}

// prepareLocalChart checks a chart folder named relative to the bundle. A chart inside the
// bundle whose dependencies are present is deployed from the bundle's own files; one outside
// the bundle, or one whose dependencies must be downloaded, is packaged and embedded.
func prepareLocalChart(ctx context.Context, bad func(key, format string, args ...any) error, repo, dir string, h *fleet.HelmOptions, auth ChartAuth) ([]File, error) {
	chartDir := filepath.Join(dir, filepath.FromSlash(h.Chart))
	if strings.HasSuffix(h.Chart, ".tgz") {
		if _, err := os.Stat(chartDir); err != nil {
			return nil, bad("helm.chart", "chart archive %q not found in the bundle", h.Chart)
		}
		return nil, nil
	}
	// Helm's loader follows symlinks: none may lead out of the checkout.
	if err := checkWithin(repo, chartDir); err != nil {
		return nil, bad("helm.chart", "chart folder %q: %v", h.Chart, err)
	}
	c, err := loader.LoadDir(chartDir)
	if err != nil {
		return nil, bad("helm.chart", "chart folder %q: %v", h.Chart, err)
	}
	rel, err := filepath.Rel(dir, chartDir)
	inside := err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	missingDeps := action.CheckDependencies(c, c.Metadata.Dependencies) != nil
	if inside && (!missingDeps || h.DisableDependencyUpdate) {
		return nil, nil
	}
	ec, err := packageLocalChart(ctx, repo, chartDir, !h.DisableDependencyUpdate, auth)
	if err != nil {
		return nil, bad("helm.chart", "%v", err)
	}
	h.Chart = ec.Name
	return []File{{Name: ec.Name, Content: ec.Data}}, nil
}

// mergeValuesFiles merges helm.valuesFiles, in order, over helm.values, as Fleet does: every
// file wins over the inline values, and a later file over an earlier one. A bundle without a
// chart (raw manifests: hasChart false) has no use for values: its valuesFiles are ignored, as
// in Fleet.
func mergeValuesFiles(bad func(key, format string, args ...any) error, dir string, hasChart bool, h *fleet.HelmOptions) error {
	if len(h.ValuesFiles) == 0 {
		return nil
	}
	// Ignored or not, no values file may lie outside the bundle folder.
	for i, name := range h.ValuesFiles {
		if _, err := statWithin(dir, dir, name, "bundle folder"); errors.Is(err, errOutside) {
			return bad(fmt.Sprintf("helm.valuesFiles[%d]", i), "%v", err)
		}
	}
	if !hasChart && h.Chart == "" {
		h.ValuesFiles = nil
		return nil
	}
	merged := map[string]any{}
	if h.Values != nil {
		merged = h.Values.DeepCopy().Data
	}
	for i := range h.ValuesFiles {
		name := h.ValuesFiles[i]
		key := fmt.Sprintf("helm.valuesFiles[%d]", i)
		data, err := readWithin(dir, name)
		if err != nil {
			return bad(key, "values file %q not found in the bundle", name)
		}
		if sopsfile.Is(name, data) {
			// Merged, its values would sit in the Bundle in plain text: refused, not half-done.
			return bad(key, "values file %q is SOPS-encrypted: values files are merged into the Bundle, so only a SOPS Secret "+
				"is sealed to each cluster; put the values in one and read it with helm.valuesFrom (docs/secrets.md)", name)
		}
		vals := map[string]any{}
		if err := yaml.Unmarshal(data, &vals); err != nil {
			return bad(key, "values file %q is not valid YAML: %v", name, err)
		}
		merged = chartutil.CoalesceTables(vals, merged)
	}
	h.Values = &fleet.GenericMap{Data: merged}
	h.ValuesFiles = nil
	return nil
}

// errOutside marks a path that leaves the folder it must stay in.
var errOutside = errors.New("outside")

// statWithin stats name, relative to base, which must stay inside top (what names top in
// errors): by its text (no absolute path, no way up past top) and through symlinks, which
// os.Root refuses to follow out of top.
func statWithin(top, base, name, what string) (fs.FileInfo, error) {
	full := filepath.Join(base, filepath.FromSlash(name))
	rel, err := filepath.Rel(top, full)
	if filepath.IsAbs(name) || err != nil || !filepath.IsLocal(rel) && rel != "." {
		return nil, fmt.Errorf("%q is outside the %s: %w", name, what, errOutside)
	}
	r, err := os.OpenRoot(top)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	st, err := r.Stat(rel)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%q reaches outside the %s through a symlink: %w", name, what, errOutside)
	}
	return st, err
}

// readWithin reads name, relative to dir, without leaving dir.
func readWithin(dir, name string) ([]byte, error) {
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadFile(filepath.FromSlash(name))
}
