package cmd

import (
	"errors"
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
		// The pull request breaks a bundle: the job fails, after writing the comment.
		if err == nil || !strings.Contains(err.Error(), "1 bundle(s) could not be planned") {
			t.Errorf("%s: a bundle that could not be planned fails the job, got %v", job, err)
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
		l, _, _ = strings.Cut(l, " || ")
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

// fleet plan's exit status tells a pipeline what the report says: 1 when a bundle could not be
// planned, and with --detailed-exitcode 2 when clusters change, 0 when none do.
func TestPlanExitStatus(t *testing.T) {
	dir := t.TempDir()
	repo, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	const fixture = "../cli/plan/testdata"
	copyTree(t, filepath.Join(fixture, "base"), dir)
	base := commitAll(t, repo, "base")
	copyTree(t, filepath.Join(fixture, "head"), dir)
	broken := commitAll(t, repo, "a change that breaks a bundle")
	if err := os.RemoveAll(filepath.Join(dir, "broken")); err != nil {
		t.Fatal(err)
	}
	changed := commitAll(t, repo, "a change")
	plan := func(head string, extra ...string) error {
		args := append([]string{"plan", "--repo", dir, "--base", base, "--head", head, "--name", "shop",
			"--clusters-file", filepath.Join(fixture, "clusters.yaml"), "--targets-file", filepath.Join(fixture, "targets.yaml")}, extra...)
		out, err := runRoot(t, args...)
		if !strings.Contains(out, "shop-web") && head != base {
			t.Errorf("plan of %s printed no report:\n%s", head, out)
		}
		return err
	}
	if err := plan(broken); err == nil || !strings.Contains(err.Error(), "could not be planned") {
		t.Errorf("a bundle that could not be planned: %v, want an error", err)
	}
	if err := plan(changed); err != nil {
		t.Errorf("changes without --detailed-exitcode: %v, want success", err)
	}
	var exit *ExitCode
	if err := plan(changed, "--detailed-exitcode"); !errors.As(err, &exit) || exit.Code != 2 {
		t.Errorf("changes with --detailed-exitcode: %v, want exit status 2", err)
	}
	if err := plan(base, "--detailed-exitcode"); err != nil {
		t.Errorf("no change with --detailed-exitcode: %v, want success", err)
	}
}
