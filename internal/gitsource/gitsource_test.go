package gitsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestSameRepo(t *testing.T) {
	same := [][2]string{
		{"https://github.com/org/repo", "https://github.com/org/repo.git"},
		{"https://github.com/Org/Repo.git", "git@github.com:org/repo.git"},
		{"ssh://git@github.com/org/repo", "https://github.com/org/repo/"},
		{"ssh://git@bitbucket.example:7999/proj/repo.git", "https://bitbucket.example/proj/repo"},
		{"http://127.0.0.1:34537/bad.git", "http://127.0.0.1:34537/bad"},
	}
	for _, c := range same {
		if !SameRepo(c[0], c[1]) {
			t.Errorf("%s and %s should be the same repository (%q, %q)", c[0], c[1], normalize(c[0]), normalize(c[1]))
		}
	}
	different := [][2]string{
		{"https://github.com/org/repo", "https://github.com/org/repo2"},
		{"https://github.com/org/repo", "https://gitlab.com/org/repo"},
		{"", ""},
	}
	for _, c := range different {
		if SameRepo(c[0], c[1]) {
			t.Errorf("%s and %s should differ", c[0], c[1])
		}
	}
}

// A repository URL with credentials shows none of them where it is displayed, and errors that
// quote it (git's, HTTP's) are scrubbed but still unwrap.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:s3cret@git.example/org/repo.git": "https://git.example/org/repo.git",
		"https://ghp_TOKEN@github.com/org/repo":        "https://github.com/org/repo",
		"https://git.example/org/repo":                 "https://git.example/org/repo",
		"git@github.com:org/repo.git":                  "git@github.com:org/repo.git",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	cause := context.DeadlineExceeded
	err := scrub(fmt.Errorf("Get \"https://ghp_TOKEN@github.com/org/repo/info/refs\": %w", cause))
	if strings.Contains(err.Error(), "ghp_TOKEN") || !strings.Contains(err.Error(), "https://github.com/org/repo/info/refs") || !errors.Is(err, cause) {
		t.Errorf("scrubbed: %v", err)
	}
	_, err = LatestCommit(context.Background(), Source{URL: "https://user:s3cret@127.0.0.1:1/repo.git", Branch: "main"})
	if err == nil || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "user") {
		t.Errorf("a failed listing shows the credentials: %v", err)
	}
}

// A checkout holds the repository's submodules at the commits it records.
func TestCheckoutWithSubmodules(t *testing.T) {
	root := t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "protocol.file.allow=always", "-c", "user.name=t", "-c", "user.email=t@example.invalid"}, args...)...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	sub, main := filepath.Join(root, "sub"), filepath.Join(root, "main")
	for _, d := range []string{sub, main} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		git(d, "init", "-q", "--initial-branch=main")
	}
	if err := os.WriteFile(filepath.Join(sub, "cm.yaml"), []byte("kind: ConfigMap\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(sub, "add", "-A")
	git(sub, "commit", "-q", "-m", "sub")
	if err := os.WriteFile(filepath.Join(main, "README"), []byte("main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(main, "submodule", "-q", "add", "file://"+sub, "vendored")
	git(main, "add", "-A")
	git(main, "commit", "-q", "-m", "main")

	dir := filepath.Join(root, "checkout")
	if _, err := Checkout(context.Background(), Source{URL: "file://" + main, Branch: "main"}, dir, ""); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "vendored", "cm.yaml"))
	if err != nil || string(data) != "kind: ConfigMap\n" {
		t.Fatalf("the submodule's file: %q %v", data, err)
	}
}
