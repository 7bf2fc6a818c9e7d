package render

import (
	"fmt"
	iofs "io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
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
// sources, configurations and the rest) must exist in fs, and none may be one kustomize takes
// for remote. Kustomize decides that before it looks for a local file (a URL is fetched even
// where a file of that very path exists), so remote is told by kustomize's own rules (remote)
// first. A kustomization this cannot read is refused too: kustomize reads it as this does.
// krusty offers no way to give kustomize a loader of our own (its loader is internal), so this
// check, run on every kustomization of the bundle before krusty runs, is that loader's gate.
func localOnly(fs filesys.FileSystem, root string) error {
	var refused []string
	err := fs.Walk(root, func(p string, info iofs.FileInfo, err error) error {
		if err != nil || info.IsDir() || !isKustomization(path.Base(p)) {
			return err
		}
		file := strings.TrimPrefix(p, root+"/")
		raw, err := fs.ReadFile(p)
		if err != nil {
			return err
		}
		var k types.Kustomization
		if err := k.Unmarshal(raw); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		k.FixKustomization()
		dir := path.Dir(p)
		for field, entries := range kustomizationPaths(&k) {
			for _, e := range entries {
				if e == "" {
					continue
				}
				if remote(e) || strings.Contains(e, "\n") || !fs.Exists(path.Join(dir, e)) {
					refused = append(refused, fmt.Sprintf("%s: %s %q", file, field, e))
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(refused) > 0 {
		slices.Sort(refused)
		return fmt.Errorf("not files of the bundle (the agent fetches no remote kustomize resources unless %s=true): %s",
			RemoteKustomizeEnv, strings.Join(refused, "; "))
	}
	return nil
}

// scpUser is the user@ that starts an scp-style git address, as kustomize reads one.
var scpUser = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9-]*@`)

// remote says whether kustomize may take path e for something to fetch rather than a file of
// the bundle: a URL of any scheme (kustomize GETs http and https ones as files), a git address
// (git:: prefix, ssh, file, scp-style user@host, or github.com/ and github.com: without scheme),
// or a file source whose key or path part is one of those.
func remote(e string) bool {
	if strings.Contains(e, "=") {
		for _, part := range strings.Split(e, "=") {
			if part != "" && remote(part) {
				return true
			}
		}
	}
	lower := strings.ToLower(e)
	if strings.HasPrefix(lower, "git::") || strings.HasPrefix(lower, "github.com/") || strings.HasPrefix(lower, "github.com:") ||
		strings.Contains(lower, "://") || scpUser.MatchString(e) {
		return true
	}
	u, err := url.Parse(e)
	return err != nil || u.Scheme != "" || u.Host != ""
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
			// key=path; remote looks at both parts.
			if _, file, found := strings.Cut(s, "="); found && !strings.Contains(file, "=") {
				if remote(s) {
					out[field] = append(out[field], s)
					continue
				}
				s = file
			}
			out[field] = append(out[field], s)
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
