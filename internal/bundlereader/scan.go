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
	// FleetYAML is the path of its options file (fleet.yaml, or the file ScanOptions name)
	// relative to the root, or "" when it has none.
	FleetYAML string
	// OptionsName is the options file's name without extension when it is not fleet.yaml
	// (fleet apply -b, or a driven-scan path naming one): it is part of the bundle's name.
	OptionsName string
}

// ScanOptions change which folders become bundles, as fleet apply's --bundle-file,
// --driven-scan and --driven-scan-sep do.
type ScanOptions struct {
	// OptionsFile replaces fleet.yaml: folders holding a file of this name (relative to the
	// folder) are bundles, with their options read from it.
	OptionsFile string
	// Driven makes every path exactly one bundle, nothing searched below it: "dir" or
	// "dir<DrivenSep>file", file being the bundle's options file relative to dir.
	Driven    bool
	DrivenSep string
}

// Discover finds the bundle folders under root for the given paths (globs allowed, relative to
// root; none means the root itself), as Fleet does: below each path, a folder with a fleet.yaml
// or fleet.yml is a bundle; the path itself is one too when it holds manifests, directly or in
// subfolders without fleet.yaml (those files then belong to it). Hidden folders are skipped, and
// so is anything a .fleetignore excludes. The result is sorted by path.
func Discover(root string, paths []string) ([]BundleDir, error) {
	return DiscoverWith(root, paths, ScanOptions{})
}

// DiscoverWith is Discover with fleet apply's scan options.
func DiscoverWith(root string, paths []string, so ScanOptions) ([]BundleDir, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	if so.Driven {
		return drivenDirs(root, paths, so)
	}
	seen := map[string]BundleDir{}
	for _, p := range paths {
		matches, err := expand(root, p)
		if err != nil {
			return nil, err
		}
		for _, m := range matches {
			if err := discoverIn(root, m, so, seen); err != nil {
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
	if err := localPath(p); err != nil {
		return nil, err
	}
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
		if _, inside := insideTop(root, m); !inside {
			return nil, fmt.Errorf("path %q: %s is a symlink that leads outside the checkout: %w", p, m, errOutside)
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

// drivenDirs takes each path as one bundle folder, optionally with its options file.
func drivenDirs(root string, paths []string, so ScanOptions) ([]BundleDir, error) {
	sep := so.DrivenSep
	if sep == "" {
		sep = ":"
	}
	var out []BundleDir
	seen := map[string]string{}
	for _, p := range paths {
		dir, file, hasFile := strings.Cut(p, sep)
		dir = cleanRel(dir)
		if err := localPath(dir); err != nil {
			return nil, fmt.Errorf("driven scan %w", err)
		}
		st, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir)))
		if err != nil || !st.IsDir() {
			return nil, fmt.Errorf("driven scan path %q: no such folder %q in the repository", p, dir)
		}
		if _, inside := insideTop(root, filepath.Join(root, filepath.FromSlash(dir))); !inside {
			return nil, fmt.Errorf("driven scan path %q: %q is a symlink that leads outside the checkout: %w", p, dir, errOutside)
		}
		d := BundleDir{Path: dir}
		if hasFile {
			if file == "" || !filepath.IsLocal(filepath.FromSlash(file)) {
				return nil, fmt.Errorf("driven scan path %q: %q must name a file in the folder %q", p, file, dir)
			}
			if st, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir), file)); err != nil || st.IsDir() {
				return nil, fmt.Errorf("driven scan path %q: options file %s not found", p, path.Join(dir, file))
			}
			d.FleetYAML = path.Join(dir, file)
			d.OptionsName = strings.TrimSuffix(path.Base(file), path.Ext(file))
		} else if fy := findFleetYAML(filepath.Join(root, filepath.FromSlash(dir)), ""); fy != "" {
			d.FleetYAML = path.Join(dir, fy)
		}
		key := d.Path + "\x00" + d.FleetYAML
		if _, dup := seen[key]; dup {
			continue
		}
		seen[key] = p
		out = append(out, d)
	}
	return out, nil
}

func discoverIn(root, start string, so ScanOptions, seen map[string]BundleDir) error {
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
		if fy := findFleetYAML(abs, so.OptionsFile); fy != "" {
			bd := BundleDir{Path: rel, FleetYAML: path.Join(rel, fy)}
			if so.OptionsFile != "" {
				bd.OptionsName = strings.TrimSuffix(fy, path.Ext(fy))
			}
			seen[rel] = bd
			return nil
		}
		if rel == start && holdsManifests(root, rel, so, ignores) {
			seen[rel] = BundleDir{Path: rel}
		}
		return nil
	})
}

// holdsManifests reports whether folder rel holds manifests directly or in subfolders that are
// not bundles of their own.
func holdsManifests(root, rel string, so ScanOptions, ignores *ignorer) bool {
	abs := filepath.Join(root, filepath.FromSlash(rel))
	if hasManifests(abs) {
		return true
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return false
	}
	for _, e := range entries {
		sub := path.Join(rel, e.Name())
		if !e.IsDir() || isHidden(e.Name()) || ignores.ignored(sub, true) {
			continue
		}
		if findFleetYAML(filepath.Join(abs, e.Name()), so.OptionsFile) != "" {
			continue
		}
		if holdsManifests(root, sub, so, ignores) {
			return true
		}
	}
	return false
}

// looseFolders lists the folders below the bundle folder, among its files, that directly hold
// manifests: Fleet puts their files into the bundle (the root's, for a repository without any
// fleet.yaml).
func looseFolders(d BundleDir, files []File) []string {
	var out []string
	seen := map[string]bool{}
	for _, f := range files {
		dir := path.Dir(f.Name)
		if dir == "." || seen[dir] || !isManifest(path.Base(f.Name)) {
			continue
		}
		seen[dir] = true
		out = append(out, path.Join(d.Path, dir))
	}
	sort.Strings(out)
	return out
}

// findFleetYAML returns the name of dir's options file: optionsFile when set, else fleet.yaml
// or fleet.yml; "" when it has none.
func findFleetYAML(dir, optionsFile string) string {
	names := fleetYAMLNames
	if optionsFile != "" {
		names = []string{optionsFile}
	}
	for _, n := range names {
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

// localPath refuses a path (cleaned by cleanRel) that climbs out of the checkout.
func localPath(p string) error {
	if p != "." && !filepath.IsLocal(filepath.FromSlash(p)) {
		return fmt.Errorf("path %q leaves the checkout: %w", p, errOutside)
	}
	return nil
}

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
