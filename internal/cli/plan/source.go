package plan

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Checkout is a revision's files in a folder of their own, as the GitRepo's clone would have
// them; Close removes the folder (nothing for the working tree).
type Checkout struct {
	Dir    string
	Commit string
	temp   bool
}

// Close removes a revision's folder.
func (c *Checkout) Close() {
	if c != nil && c.temp {
		_ = os.RemoveAll(c.Dir)
	}
}

// Open checks out rev of the git repository holding dir ("" for its working tree as it is)
// into a temporary folder, with go-git: no git binary, no change to the checkout.
func Open(dir, rev string) (*Checkout, error) {
	repo, err := git.PlainOpenWithOptions(dir, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return nil, err
	}
	if rev == "" {
		head, err := repo.Head()
		commit := ""
		if err == nil {
			commit = head.Hash().String()
		}
		return &Checkout{Dir: wt.Filesystem.Root(), Commit: commit}, nil
	}
	h, err := repo.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("revision %q: %w", rev, err)
	}
	commit, err := repo.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("revision %q: %w", rev, err)
	}
	tree, err := commit.Tree()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "fleet-plan-")
	if err != nil {
		return nil, err
	}
	c := &Checkout{Dir: tmp, Commit: h.String(), temp: true}
	root, err := os.OpenRoot(tmp)
	if err != nil {
		c.Close()
		return nil, err
	}
	defer root.Close()
	if err := tree.Files().ForEach(func(f *object.File) error { return write(root, f) }); err != nil {
		c.Close()
		return nil, fmt.Errorf("revision %q: %w", rev, err)
	}
	return c, nil
}

// write puts one file of a tree into the checkout root, symlinks as symlinks (which reading
// refuses to follow out of the checkout, as it does in a clone). Every write goes through root:
// a symlink the tree itself made (dir -> /home/user/.ssh) cannot carry a later file of the tree
// (dir/authorized_keys) out of the checkout.
func write(root *os.Root, f *object.File) error {
	name := filepath.FromSlash(f.Name)
	if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	content, err := f.Contents()
	if err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	switch f.Mode {
	case filemode.Symlink:
		return root.Symlink(content, name)
	case filemode.Executable:
		mode = 0o755
	}
	if err := root.WriteFile(name, []byte(content), mode); err != nil {
		return fmt.Errorf("%s: %w", f.Name, err)
	}
	return nil
}
