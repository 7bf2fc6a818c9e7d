package render

import (
	"fmt"
	"path"
	"strings"

	jsonpatch "github.com/evanphx/json-patch"
	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ApplyOverlays applies the selected overlays in order. A file under overlays/NAME/ replaces the
// bundle file at the same relative path (or adds it); a file named BASE_patch.yaml (or .yml,
// .json) is a JSON merge patch for BASE.yaml (or .yml, .json) at that path. The overlays/
// folder stays among the files (kustomize folders are often named so) but is never deployed as
// raw manifests.
func ApplyOverlays(files Files, y *fleet.YAMLOptions) (Files, error) {
	out := Files{}
	for n, d := range files {
		out[n] = d
	}
	if y == nil {
		return out, nil
	}
	for _, ov := range y.Overlays {
		prefix := "overlays/" + ov + "/"
		found := false
		// Replacements first, then patches, so a patch can apply to a replaced file.
		var patches []string
		for n, d := range files {
			if !strings.HasPrefix(n, prefix) {
				continue
			}
			found = true
			rel := strings.TrimPrefix(n, prefix)
			if isPatch(rel) {
				patches = append(patches, n)
				continue
			}
			out[rel] = d
		}
		if !found {
			return nil, fmt.Errorf("yaml.overlays: overlay %q has no files under %s", ov, prefix)
		}
		for _, n := range patches {
			rel := strings.TrimPrefix(n, prefix)
			target, ok := patchTarget(out, rel)
			if !ok {
				return nil, fmt.Errorf("overlay %s: %s patches no file of the bundle", ov, rel)
			}
			patched, err := mergePatch(out[target], files[n])
			if err != nil {
				return nil, fmt.Errorf("overlay %s: patching %s with %s: %w", ov, target, rel, err)
			}
			out[target] = patched
		}
	}
	return out, nil
}

func isPatch(name string) bool {
	ext := path.Ext(name)
	return strings.HasSuffix(strings.TrimSuffix(name, ext), "_patch")
}

// patchTarget finds the file BASE.{yaml,yml,json} that BASE_patch.EXT patches.
func patchTarget(files Files, patch string) (string, bool) {
	base := strings.TrimSuffix(strings.TrimSuffix(patch, path.Ext(patch)), "_patch")
	for _, ext := range []string{".yaml", ".yml", ".json"} {
		if _, ok := files[base+ext]; ok {
			return base + ext, true
		}
	}
	return "", false
}

func mergePatch(doc, patch []byte) ([]byte, error) {
	docJSON, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	patchJSON, err := yaml.YAMLToJSON(patch)
	if err != nil {
		return nil, err
	}
	merged, err := jsonpatch.MergePatch(docJSON, patchJSON)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(merged)
}
