package bundlereader

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// File is one file of a bundle, named relative to the bundle's folder with forward slashes.
type File struct {
	Name    string
	Content []byte
}

// ReadFiles returns the files of the bundle folder dir (relative to root), leaving out hidden
// files and folders, whatever a .fleetignore excludes, its fleet.yaml, and the folders of other
// bundles nested in it. Files are sorted by name.
func ReadFiles(root string, dir BundleDir, all []BundleDir) ([]File, error) {
	nested := map[string]bool{}
	for _, d := range all {
		if d.Path != dir.Path && isBelow(d.Path, dir.Path) {
			nested[d.Path] = true
		}
	}
	ignores := newIgnorer(root)
	var files []File
	start := filepath.Join(root, filepath.FromSlash(dir.Path))
	err := filepath.WalkDir(start, func(abs string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, abs)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == dir.Path {
			return nil
		}
		if isHidden(d.Name()) || ignores.ignored(rel, d.IsDir()) || nested[rel] {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || rel == dir.FleetYAML {
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // symlinks and devices are not content
		}
		data, err := os.ReadFile(abs)
		if err != nil {
			return err
		}
		name, err := filepath.Rel(start, abs)
		if err != nil {
			return err
		}
		files = append(files, File{Name: filepath.ToSlash(name), Content: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	return files, nil
}

// isBelow reports whether p is inside folder dir ("." is the root and holds everything).
func isBelow(p, dir string) bool {
	if dir == "." {
		return p != "."
	}
	return strings.HasPrefix(p, dir+"/")
}
