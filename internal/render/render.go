// Package render turns a bundle's resources and one cluster's options into the manifests to
// deploy, the way the agent deploys them: overlays replace and patch files, the bundle becomes a
// Helm chart (a chart it carries, or one generated from raw manifests), Helm renders it with the
// values, and kustomize post-renders. The agent installs the same chart; `fleet test` prints the
// manifests.
package render

import (
	"bytes"
	"fmt"
	"io"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/postrender"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"

	"github.com/fleetgo/fleet/internal/bundlereader"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Files are a bundle's files by name (forward slashes, relative to the bundle folder).
type Files map[string][]byte

// FromResources decodes a Bundle's resources.
func FromResources(resources []fleet.BundleResource) (Files, error) {
	files := Files{}
	for _, r := range resources {
		data, err := bundlereader.Decode(r)
		if err != nil {
			return nil, err
		}
		files[path.Clean(r.Name)] = data
	}
	return files, nil
}

// Chart builds the Helm chart to install for these files and options: overlays applied, then the
// chart the options name or one generated from the manifests, with kustomize wired in as needed.
// It also returns the post-renderer to install with (nil when kustomize is not used).
func Chart(files Files, opts *fleet.BundleDeploymentOptions, name string) (*chart.Chart, *Kustomizer, error) {
	files, err := ApplyOverlays(files, opts.YAML)
	if err != nil {
		return nil, nil, err
	}
	kdir := kustomizeDir(files, opts)
	ref := ""
	if opts.Helm != nil {
		ref = opts.Helm.Chart
	}
	if _, ok := files["Chart.yaml"]; ok && ref == "" {
		// A bundle folder that is a chart is deployed as that chart.
		ref = "."
	}
	if ref != "" {
		c, err := carriedChart(files, ref)
		if err != nil {
			return nil, nil, err
		}
		var k *Kustomizer
		if kdir != "" {
			k = &Kustomizer{Files: files, Dir: kdir, Bundle: name}
		}
		return c, k, nil
	}
	if kdir != "" {
		// Raw manifests with a kustomization: kustomize builds them, the chart carries the result.
		out, err := (&Kustomizer{Files: files, Dir: kdir, Bundle: name}).Build(nil)
		if err != nil {
			return nil, nil, err
		}
		return generatedChart(name, map[string][]byte{"kustomize.yaml": escapeTemplates(out)}), nil, nil
	}
	templates := map[string][]byte{}
	for n, data := range files {
		if isManifest(n) {
			templates[n] = data
		}
	}
	return generatedChart(name, templates), nil, nil
}

// Template renders the chart as `helm template` would, for release name in namespace.
func Template(c *chart.Chart, values map[string]any, release, namespace string, post *Kustomizer) (string, error) {
	if post == nil {
		return TemplateWith(c, values, release, namespace, nil)
	}
	return TemplateWith(c, values, release, namespace, post)
}

// TemplateWith is Template with any post-renderer (nil: none), such as the agent's own.
func TemplateWith(c *chart.Chart, values map[string]any, release, namespace string, post postrender.PostRenderer) (string, error) {
	cfg := &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...any) {},
	}
	install := action.NewInstall(cfg)
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.IncludeCRDs = true
	install.ReleaseName = release
	install.Namespace = namespace
	install.DisableHooks = true
	install.PostRenderer = post
	rel, err := install.Run(c, values)
	if err != nil {
		return "", fmt.Errorf("rendering chart %s: %w", c.Name(), err)
	}
	return rel.Manifest, nil
}

// carriedChart loads the chart the bundle carries: a folder of its files or an archive.
func carriedChart(files Files, ref string) (*chart.Chart, error) {
	ref = path.Clean(strings.TrimPrefix(ref, "./"))
	if data, ok := files[ref]; ok {
		c, err := loader.LoadArchive(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("helm.chart %s: %w", ref, err)
		}
		return c, nil
	}
	var bufs []*loader.BufferedFile
	prefix := ref + "/"
	if ref == "." {
		prefix = ""
	}
	for n, data := range files {
		if strings.HasPrefix(n, prefix) {
			bufs = append(bufs, &loader.BufferedFile{Name: strings.TrimPrefix(n, prefix), Data: data})
		}
	}
	if len(bufs) == 0 {
		return nil, fmt.Errorf("helm.chart %s: not among the bundle's files", ref)
	}
	sort.Slice(bufs, func(i, j int) bool { return bufs[i].Name < bufs[j].Name })
	c, err := loader.LoadFiles(bufs)
	if err != nil {
		return nil, fmt.Errorf("helm.chart %s: %w", ref, err)
	}
	return c, nil
}

// generatedChart wraps manifests into a chart whose templates they are.
func generatedChart(name string, templates map[string][]byte) *chart.Chart {
	c := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: name, Version: "0.0.0"}}
	names := make([]string, 0, len(templates))
	for n := range templates {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c.Templates = append(c.Templates, &chart.File{Name: path.Join("templates", n), Data: templates[n]})
	}
	return c
}

// escapeTemplates keeps Helm from interpreting template braces in already-rendered manifests.
func escapeTemplates(data []byte) []byte {
	return bytes.ReplaceAll(data, []byte("{{"), []byte(`{{"{{"}}`))
}

// isManifest reports whether a bundle file is a Kubernetes manifest of a raw bundle.
func isManifest(name string) bool {
	if strings.HasPrefix(name, "overlays/") || strings.HasPrefix(name, bundlereader.EmbeddedChartDir+"/") {
		return false
	}
	base := path.Base(name)
	if base == "fleet.yaml" || base == "fleet.yml" || base == "kustomization.yaml" || base == "kustomization.yml" || base == "Kustomization" {
		return false
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// ReleaseName is the Helm release of a deployment: helm.releaseName, else the bundle's name.
func ReleaseName(opts *fleet.BundleDeploymentOptions, bundleName string) string {
	if opts.Helm != nil && opts.Helm.ReleaseName != "" {
		return opts.Helm.ReleaseName
	}
	return bundleName
}

// Namespace is where namespaced resources without a namespace go: the forced target namespace,
// else defaultNamespace, else "default".
func Namespace(opts *fleet.BundleDeploymentOptions) string {
	switch {
	case opts.TargetNamespace != "":
		return opts.TargetNamespace
	case opts.DefaultNamespace != "":
		return opts.DefaultNamespace
	}
	return "default"
}

// Manifests renders what a deployment with these options installs, as one YAML stream.
func Manifests(resources []fleet.BundleResource, opts *fleet.BundleDeploymentOptions, bundleName string) (string, error) {
	files, err := FromResources(resources)
	if err != nil {
		return "", err
	}
	release := ReleaseName(opts, bundleName)
	c, post, err := Chart(files, opts, release)
	if err != nil {
		return "", err
	}
	values := map[string]any{}
	if opts.Helm != nil && opts.Helm.Values != nil {
		values = opts.Helm.Values.DeepCopy().Data
	}
	return Template(c, values, release, Namespace(opts), post)
}
