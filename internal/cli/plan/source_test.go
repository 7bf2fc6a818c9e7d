package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// A pull request's tree may hold a symlink and, under the same name, a folder with a file: the
// checkout of that revision writes nothing through the symlink, outside the checkout.
func TestCheckoutWritesNothingThroughItsOwnSymlinks(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	put := func(o interface {
		Encode(plumbing.EncodedObject) error
	}) plumbing.Hash {
		t.Helper()
		obj := repo.Storer.NewEncodedObject()
		if err := o.Encode(obj); err != nil {
			t.Fatal(err)
		}
		h, err := repo.Storer.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	blob := func(content string) plumbing.Hash {
		t.Helper()
		obj := repo.Storer.NewEncodedObject()
		obj.SetType(plumbing.BlobObject)
		w, err := obj.Writer()
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write([]byte(content))
		_ = w.Close()
		h, err := repo.Storer.SetEncodedObject(obj)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	inner := put(&object.Tree{Entries: []object.TreeEntry{{Name: "pwned", Mode: filemode.Regular, Hash: blob("written outside\n")}}})
	root := put(&object.Tree{Entries: []object.TreeEntry{
		{Name: "fleet.yaml", Mode: filemode.Regular, Hash: blob("defaultNamespace: x\n")},
		{Name: "out", Mode: filemode.Symlink, Hash: blob(outside)},
		{Name: "out", Mode: filemode.Dir, Hash: inner},
	}})
	sig := object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(1700000000, 0)}
	commit := put(&object.Commit{Author: sig, Committer: sig, Message: "pr\n", TreeHash: root})

	c, err := Open(dir, commit.String())
	if err == nil {
		c.Close()
	}
	if _, statErr := os.Stat(filepath.Join(outside, "pwned")); statErr == nil {
		t.Fatal("the checkout wrote through its own symlink, outside the checkout")
	}
	if err == nil || !strings.Contains(err.Error(), "out/pwned") {
		t.Fatalf("want the revision refused naming out/pwned: %v", err)
	}
}
