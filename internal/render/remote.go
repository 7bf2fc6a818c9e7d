package render

import (
	"fmt"
	iofs "io/fs"
	"path"
	"strings"

	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// RemoteKustomizeEnv, set to "true" in the agent's environment (a Cluster's agentEnvVars), lets
// kustomizations of that cluster's bundles name remote resources, as Fleet's agents do. Without
// it, the agent fetches nothing a kustomization names by URL or git reference: kustomize would
// fetch it from inside the downstream cluster, with that cluster's network position (its cloud
// metadata service, its internal services), for whoever wrote the bundle.
const RemoteKustomizeEnv = "FLEET_KUSTOMIZE_REMOTE_RESOURCES"

// RemoteKustomize is whether remote kustomize resources are fetched (the agent sets it from
// RemoteKustomizeEnv).
var RemoteKustomize bool

// localOnly refuses kustomizations under root in fs that name anything that is not a file or
// folder of the bundle: every path they give (resources, bases, components, patches, generator
// sources, configurations and the rest) must exist in fs.
func localOnly(fs filesys.FileSystem, root string) error {
	var refused []string
	err := fs.Walk(root, func(p string, info iofs.FileInfo, err error) error {
		if err != nil || info.IsDir() || !isKustomization(path.Base(p)) {
			return err
		}
		raw, err := fs.ReadFile(p)
		if err != nil {
			return err
		}
		var k types.Kustomization
		if err := yaml.Unmarshal(raw, &k); err != nil {
			return nil // kustomize reports it
		}
		dir, file := path.Dir(p), strings.TrimPrefix(p, root+"/")
		for field, entries := range kustomizationPaths(&k) {
			for _, e := range entries {
				if e == "" || strings.Contains(e, "\n") || fs.Exists(path.Join(dir, e)) {
					continue
				}
				refused = append(refused, fmt.Sprintf("%s: %s %q", file, field, e))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		return fmt.Errorf("not files of the bundle (the agent fetches no remote kustomize resources unless %s=true): %s",
			RemoteKustomizeEnv, strings.Join(refused, "; "))
	}
	return nil
}

func isKustomization(name string) bool {
	for _, n := range kustomizationNames {
		if name == n {
			return true
		}
	}
	return false
}

// kustomizationPaths are the paths a kustomization names, by field.
func kustomizationPaths(k *types.Kustomization) map[string][]string {
	out := map[string][]string{"resources": k.Resources, "bases": k.Bases, "components": k.Components, "crds": k.Crds,
		"configurations": k.Configurations, "generators": k.Generators, "transformers": k.Transformers, "validators": k.Validators}
	for _, p := range k.PatchesStrategicMerge {
		out["patchesStrategicMerge"] = append(out["patchesStrategicMerge"], string(p))
	}
	for _, p := range append(k.Patches, k.PatchesJson6902...) {
		out["patches"] = append(out["patches"], p.Path)
	}
	for _, r := range k.Replacements {
		out["replacements"] = append(out["replacements"], r.Path)
	}
	if p, ok := k.OpenAPI["path"]; ok {
		out["openapi"] = []string{p}
	}
	sources := func(field string, kv types.KvPairSources) {
		for _, s := range kv.FileSources {
			_, file, found := strings.Cut(s, "=")
			if !found {
				file = s
			}
			out[field] = append(out[field], file)
		}
		out[field] = append(out[field], kv.EnvSources...)
	}
	for _, g := range k.ConfigMapGenerator {
		sources("configMapGenerator", g.KvPairSources)
	}
	for _, g := range k.SecretGenerator {
		sources("secretGenerator", g.KvPairSources)
	}
	return out
}
