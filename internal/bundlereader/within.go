package bundlereader

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// maxLinkDepth bounds how many symlinked folders one copy follows into (a loop of links ends
// there with an error).
const maxLinkDepth = 16

// insideTop reports whether the real path of p (every symlink resolved) lies inside top, itself
// taken by its real path. A path that does not exist is not inside.
func insideTop(top, p string) (string, bool) {
	realTop, err := filepath.EvalSymlinks(top)
	if err != nil {
		return "", false
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false
	}
	rel, err := filepath.Rel(realTop, real)
	return real, err == nil && (rel == "." || filepath.IsLocal(rel))
}

// copyWithin copies the folder src to dst with no symlink left in the copy: a symlink whose
// target stays inside top (the checkout) is copied as the file or folder it points to, and one
// that leaves top is refused, naming it. Helm's chart loader follows symlinks, so a chart copied
// as is could carry any file of the host that runs `fleet apply` (a service-account token among
// them) into a Bundle.
func copyWithin(top, src, dst string) error {
	return copyWithinDepth(top, src, src, dst, 0)
}

// checkWithin refuses, as copyWithin does, a folder with a symlink that leads out of top, and
// copies nothing.
func checkWithin(top, src string) error {
	return copyWithinDepth(top, src, src, "", 0)
}

func copyWithinDepth(top, base, src, dst string, depth int) error {
	if depth > maxLinkDepth {
		return fmt.Errorf("%s: more than %d symlinked folders deep", src, maxLinkDepth)
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		out := filepath.Join(dst, rel)
		switch {
		case dst == "" && d.Type()&fs.ModeSymlink == 0:
			return nil
		case d.IsDir():
			return os.MkdirAll(out, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			real, ok := insideTop(top, p)
			if !ok {
				name, _ := filepath.Rel(base, p)
				target, _ := os.Readlink(p)
				return fmt.Errorf("symlink %s (to %s) leads outside the checkout: %w", filepath.ToSlash(name), target, errOutside)
			}
			st, err := os.Stat(real)
			if err != nil {
				return err
			}
			switch {
			case st.IsDir():
				if dst == "" {
					out = ""
				}
				return copyWithinDepth(top, base, real, out, depth+1)
			case dst == "":
				return nil
			}
			return copyFile(real, out, st.Mode())
		case d.Type().IsRegular():
			st, err := d.Info()
			if err != nil {
				return err
			}
			return copyFile(p, out, st.Mode())
		default:
			return nil // devices, sockets and pipes are not chart files
		}
	})
}

func copyFile(src, dst string, mode fs.FileMode) error {
	r, err := os.Open(src)
	if err != nil {
		return err
	}
	defer r.Close()
	w, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600|mode&0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, r); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}
