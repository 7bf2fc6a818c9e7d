package bundlereader

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// prepareOptions makes one set of options self-contained: values files are merged into
// helm.values, charts from outside the folder are downloaded or packaged and returned as extra
// files, and every path the options name is checked. where names the options in errors.
func prepareOptions(where, dir string, o *fleet.BundleDeploymentOptions, auth ChartAuth) ([]File, error) {
	bad := func(key, format string, args ...interface{}) error {
		return &InputError{File: where, Key: key, Msg: fmt.Sprintf(format, args...)}
	}
	if o.Kustomize != nil && o.Kustomize.Dir != "" {
		if st, err := os.Stat(filepath.Join(dir, o.Kustomize.Dir)); err != nil || !st.IsDir() {
			return nil, bad("kustomize.dir", "folder %q not found in the bundle", o.Kustomize.Dir)
		}
	}
	if o.YAML != nil {
		for i, ov := range o.YAML.Overlays {
			if st, err := os.Stat(filepath.Join(dir, "overlays", ov)); err != nil || !st.IsDir() {
				return nil, bad(fmt.Sprintf("yaml.overlays[%d]", i), "overlay %q not found: expected folder overlays/%s", ov, ov)
			}
		}
	}
	h := o.Helm
	if h == nil {
		return nil, nil
	}
	if err := mergeValuesFiles(bad, dir, h); err != nil {
		return nil, err
	}
	switch {
	case isRemoteChart(h):
		c, err := fetchChart(h, auth)
		if err != nil {
			return nil, bad("helm.chart", "%v", err)
		}
		h.Chart, h.Repo, h.Version = c.Name, "", c.Version
		return []File{{Name: c.Name, Content: c.Data}}, nil
	case strings.HasPrefix(h.Chart, "git::"):
		c, err := fetchGitChart(h.Chart, !h.DisableDependencyUpdate, auth)
		if err != nil {
			return nil, bad("helm.chart", "%v", err)
		}
		h.Chart, h.Version = c.Name, c.Version
		return []File{{Name: c.Name, Content: c.Data}}, nil
	case h.Chart != "":
		return prepareLocalChart(bad, dir, h, auth)
	}
	return nil, nil
}

// chartMissingDependencies reports whether dir is a chart whose Chart.yaml declares dependencies
// its charts/ folder lacks.
func chartMissingDependencies(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "Chart.yaml")); err != nil {
		return false
	}
	c, err := loader.LoadDir(dir)
	return err == nil && len(c.Metadata.Dependencies) > 0 && action.CheckDependencies(c, c.Metadata.Dependencies) != nil
}

// prepareLocalChart checks a chart folder named relative to the bundle. A chart inside the
// bundle whose dependencies are present is deployed from the bundle's own files; one outside
// the bundle, or one whose dependencies must be downloaded, is packaged and embedded.
func prepareLocalChart(bad func(key, format string, args ...interface{}) error, dir string, h *fleet.HelmOptions, auth ChartAuth) ([]File, error) {
	chartDir := filepath.Join(dir, filepath.FromSlash(h.Chart))
	if strings.HasSuffix(h.Chart, ".tgz") {
		if _, err := os.Stat(chartDir); err != nil {
			return nil, bad("helm.chart", "chart archive %q not found in the bundle", h.Chart)
		}
		return nil, nil
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
	ec, err := packageLocalChart(chartDir, !h.DisableDependencyUpdate, auth)
	if err != nil {
		return nil, bad("helm.chart", "%v", err)
	}
	h.Chart = ec.Name
	return []File{{Name: ec.Name, Content: ec.Data}}, nil
}

// mergeValuesFiles merges helm.valuesFiles, in order, under helm.values: a later file wins over
// an earlier one, and inline values win over every file.
func mergeValuesFiles(bad func(key, format string, args ...interface{}) error, dir string, h *fleet.HelmOptions) error {
	if len(h.ValuesFiles) == 0 {
		return nil
	}
	merged := map[string]interface{}{}
	if h.Values != nil {
		merged = h.Values.DeepCopy().Data
	}
	for i := len(h.ValuesFiles) - 1; i >= 0; i-- {
		name := h.ValuesFiles[i]
		key := fmt.Sprintf("helm.valuesFiles[%d]", i)
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			return bad(key, "values file %q not found in the bundle", name)
		}
		vals := map[string]interface{}{}
		if err := yaml.Unmarshal(data, &vals); err != nil {
			return bad(key, "values file %q is not valid YAML: %v", name, err)
		}
		merged = chartutil.CoalesceTables(merged, vals)
	}
	h.Values = &fleet.GenericMap{Data: merged}
	h.ValuesFiles = nil
	return nil
}
