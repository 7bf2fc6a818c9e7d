package render

import (
	"bytes"
	"fmt"
	"path"

	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// helmOutputFile is where Helm's output is placed for kustomize to post-render it; it is added
// to the kustomization's resources.
const helmOutputFile = "fleet-helm-output.yaml"

var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// kustomizeDir is the folder whose kustomization applies: kustomize.dir, else the bundle root
// when it has a kustomization. Empty when kustomize is not used.
func kustomizeDir(files Files, opts *fleet.BundleDeploymentOptions) string {
	dir := "."
	if opts.Kustomize != nil && opts.Kustomize.Dir != "" {
		dir = path.Clean(opts.Kustomize.Dir)
	}
	for _, n := range kustomizationNames {
		if _, ok := files[path.Join(dir, n)]; ok {
			return dir
		}
	}
	return ""
}

// Kustomizer runs kustomize over a bundle's files in memory; as a Helm post-renderer it adds the
// rendered chart to the kustomization's resources first.
type Kustomizer struct {
	Files Files
	Dir   string
	// Bundle names the bundle (its release) in kustomize's deprecation warnings, given once per
	// bundle (WarnDeprecated).
	Bundle string
}

// Run implements Helm's post-renderer.
func (k *Kustomizer) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	out, err := k.Build(rendered.Bytes())
	if err != nil {
		return nil, err
	}
	return bytes.NewBuffer(out), nil
}

// Build runs `kustomize build` on Dir; extra, when set, is added as a resource.
func (k *Kustomizer) Build(extra []byte) ([]byte, error) {
	fs := filesys.MakeFsInMemory()
	for n, d := range k.Files {
		if err := fs.WriteFile(path.Join("/bundle", n), d); err != nil {
			return nil, err
		}
	}
	dir := path.Join("/bundle", k.Dir)
	if extra != nil {
		if err := addResource(fs, dir, extra); err != nil {
			return nil, err
		}
	}
	if !RemoteKustomize {
		if err := localOnly(fs, "/bundle"); err != nil {
			return nil, fmt.Errorf("kustomize %s: %w", k.Dir, err)
		}
	}
	resMap, err := runKustomize(fs, "/bundle", dir, k.Bundle)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", k.Dir, err)
	}
	return resMap.AsYaml()
}

// addResource writes data beside the kustomization and lists it among its resources.
func addResource(fs filesys.FileSystem, dir string, data []byte) error {
	if err := fs.WriteFile(path.Join(dir, helmOutputFile), data); err != nil {
		return err
	}
	for _, n := range kustomizationNames {
		p := path.Join(dir, n)
		if !fs.Exists(p) {
			continue
		}
		raw, err := fs.ReadFile(p)
		if err != nil {
			return err
		}
		k := map[string]any{}
		if err := yaml.Unmarshal(raw, &k); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		res, _ := k["resources"].([]any)
		k["resources"] = append([]any{helmOutputFile}, res...)
		out, err := yaml.Marshal(k)
		if err != nil {
			return err
		}
		return fs.WriteFile(p, out)
	}
	return fmt.Errorf("no kustomization in %s", dir)
}
