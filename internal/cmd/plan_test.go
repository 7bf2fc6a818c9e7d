package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// copyTree copies the files of src into dst, replacing what dst held (but .git).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	entries, _ := os.ReadDir(dst)
	for _, e := range entries {
		if e.Name() != ".git" {
			_ = os.RemoveAll(filepath.Join(dst, e.Name()))
		}
	}
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// commitAll commits the working tree and returns the commit.
func commitAll(t *testing.T, repo *git.Repository, msg string) string {
	t.Helper()
	wt, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	h, err := wt.Commit(msg, &git.CommitOptions{All: true, Author: &object.Signature{Name: "dev", Email: "dev@example.com", When: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// The CI jobs of docs/ci run their `fleet plan` line on a pull request's pair of commits: this
// runs that very line on such a pair in a local repository.
func TestPlanAsTheCIJobsRunIt(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	const fixture = "../cli/plan/testdata"
	extra := func() {
		for from, to := range map[string]string{"clusters.yaml": "fleet-clusters.yaml", "targets.yaml": "fleet-targets.yaml"} {
			data, err := os.ReadFile(filepath.Join(fixture, from))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, to), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyTree(t, filepath.Join(fixture, "base"), dir)
	extra()
	base := commitAll(t, repo, "base")
	copyTree(t, filepath.Join(fixture, "head"), dir)
	extra()
	head := commitAll(t, repo, "the pull request")
	env := map[string]string{"BASE": base, "HEAD_SHA": head, "NAME": "shop"}
	docs, err := filepath.Abs("../../docs/ci")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, job := range []string{"fleet-plan.github.yml", "fleet-plan.gitlab-ci.yml"} {
		args, out := ciCommand(t, filepath.Join(docs, job), env)
		md, err := runRoot(t, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", job, err, md)
		}
		for _, want := range []string{"### fleet plan", "| shop-web | 3 | 0 | 0 | 0 | 0 |  |", "| shop-api | 2 | 0 | 0 | 0 | 1 |  |",
			"changed: 2 clusters: logLevel: warn -&gt; error", "broken/fleet.yaml:3: malformed YAML"} {
			if !strings.Contains(md, want) {
				t.Errorf("%s: the comment lacks %q:\n%s", job, want, md)
			}
		}
		if strings.Contains(md, "hunter2") || strings.Contains(md, "correct-horse") {
			t.Errorf("%s: a Secret's value shows", job)
		}
		full, err := os.ReadFile("fleet-plan-full.md")
		if err != nil || !strings.Contains(string(full), "image: registry.example/web:1.1") {
			t.Errorf("%s: the artifact: %v", job, err)
		}
		if out != "fleet-plan.md" {
			t.Errorf("%s: the comment goes to %q", job, out)
		}
	}
}

// ciCommand finds the `fleet plan` line of a CI job, with env's variables put in: its
// arguments and the file its output goes to.
func ciCommand(t *testing.T, path string, env map[string]string) ([]string, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "- "))
		if !strings.HasPrefix(l, "fleet plan --base") {
			continue
		}
		l = os.Expand(l, func(k string) string { return env[k] })
		cmd, out, _ := strings.Cut(l, " > ")
		var args []string
		for _, f := range strings.Fields(cmd)[1:] {
			args = append(args, strings.Trim(f, `"`))
		}
		return args, strings.TrimSpace(out)
	}
	t.Fatalf("%s has no fleet plan line", path)
	return nil, ""
}
