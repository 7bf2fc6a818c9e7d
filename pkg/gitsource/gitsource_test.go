package gitsource

import "testing"

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
