package bundlereader

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// fleetYAMLNames are the file names that make a folder a bundle, in order of preference.
var fleetYAMLNames = []string{"fleet.yaml", "fleet.yml"}

// ignoreFile lists, one glob per line, files and folders to leave out of a bundle; it applies to
// its folder and everything below.
const ignoreFile = ".fleetignore"

// BundleDir is one folder that becomes a Bundle.
type BundleDir struct {
	// Path is the folder relative to the scanned root, with forward slashes; "." for the root.
	Path string
	// FleetYAML is the path of its fleet.yaml relative to the root, or "" when it has none.
	FleetYAML string
}

// Discover finds the bundle folders under root for the given paths (globs allowed, relative to
// root; none means the root itself). A folder with a fleet.yaml or fleet.yml is a bundle; so is a
// scanned path that holds manifests directly. Hidden folders are skipped, and so is anything a
// .fleetignore excludes. The result is sorted by path.
func Discover(root string, paths []string) ([]BundleDir, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	seen := map[string]BundleDir{}
	for _, p := range paths {
		matches, err := expand(root, p)
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			if err := discoverIn(root, m, seen); err != nil {
				return nil, err
			}
		}
	}
	out := make([]BundleDir, 0, len(seen))
	for _, d := range seen {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// expand resolves one path argument, which may be a glob, to existing folders relative to root.
func expand(root, p string) ([]string, error) {
	p = cleanRel(p)
	matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(p)))
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", p, err)
	}
	var dirs []string
	for _, m := range matches {
		st, err := os.Stat(m)
		if err != nil || !st.IsDir() {
			continue
		}
		rel, err := filepath.Rel(root, m)
		if err != nil {
			return nil, err
		}
		dirs = append(dirs, filepath.ToSlash(rel))
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("path %q: no such folder in the repository", p)
	}
	return dirs, nil
}

func discoverIn(root, start string, seen map[string]BundleDir) error {
	ignores := newIgnorer(root)
	return filepath.WalkDir(filepath.Join(root, filepath.FromSlash(start)), func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != start && (isHidden(d.Name()) || ignores.ignored(rel, true)) {
			return filepath.SkipDir
		}
		if fy := findFleetYAML(abs); fy != "" {
			seen[rel] = BundleDir{Path: rel, FleetYAML: path.Join(rel, fy)}
			return nil
		}
		if rel == start && hasManifests(abs) {
			seen[rel] = BundleDir{Path: rel}
		}
		return nil
	})
}

func findFleetYAML(dir string) string {
	for _, n := range fleetYAMLNames {
		if st, err := os.Stat(filepath.Join(dir, n)); err == nil && !st.IsDir() {
			return n
		}
	}
	return ""
}

// hasManifests reports whether a folder directly holds YAML or JSON files other than fleet.yaml.
func hasManifests(dir string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.IsDir() || isHidden(e.Name()) {
			continue
		}
		if isManifest(e.Name()) {
			return true
		}
	}
	return false
}

func isManifest(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		for _, n := range fleetYAMLNames {
			if name == n {
				return false
			}
		}
		return true
	}
	return false
}

func isHidden(name string) bool { return strings.HasPrefix(name, ".") && name != "." && name != ".." }

func cleanRel(p string) string {
	p = strings.Trim(filepath.ToSlash(p), "/")
	if p == "" {
		return "."
	}
	return path.Clean(p)
}

// ignorer answers whether a path is excluded by a .fleetignore in its folder or any folder above
// it (up to root). Patterns are globs matched against the base name and against the path
// relative to the .fleetignore's folder; a trailing "/" matches folders only.
type ignorer struct {
	root  string
	cache map[string][]string // folder (relative, slash form) -> patterns
}

func newIgnorer(root string) *ignorer { return &ignorer{root: root, cache: map[string][]string{}} }

func (ig *ignorer) patterns(dir string) []string {
	if p, ok := ig.cache[dir]; ok {
		return p
	}
	var pats []string
	f, err := os.Open(filepath.Join(ig.root, filepath.FromSlash(dir), ignoreFile))
	if err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			pats = append(pats, line)
		}
		f.Close()
	}
	ig.cache[dir] = pats
	return pats
}

func (ig *ignorer) ignored(rel string, isDir bool) bool {
	base := path.Base(rel)
	for dir := path.Dir(rel); ; dir = path.Dir(dir) {
		sub := strings.TrimPrefix(strings.TrimPrefix(rel, dir), "/")
		for _, pat := range ig.patterns(dir) {
			dirOnly := strings.HasSuffix(pat, "/")
			pat = strings.TrimSuffix(pat, "/")
			if dirOnly && !isDir {
				continue
			}
			if ok, _ := path.Match(pat, base); ok {
				return true
			}
			if ok, _ := path.Match(strings.TrimPrefix(pat, "/"), sub); ok {
				return true
			}
		}
		if dir == "." || dir == "/" {
			return false
		}
	}
}
