package gitsource

import (
	"context"
	"strings"
	"testing"
)

func TestGitHubAppOf(t *testing.T) {
	if app, err := GitHubAppOf(map[string][]byte{"username": []byte("u")}); app != nil || err != nil {
		t.Errorf("basic auth secret: %v, %v", app, err)
	}
	app, err := GitHubAppOf(map[string][]byte{GitHubAppIDKey: []byte("12"), GitHubAppInstallationIDKey: []byte("34"), GitHubAppPrivateKeyKey: []byte("PEM")})
	if err != nil || app.ID != 12 || app.InstallationID != 34 || string(app.PrivateKey) != "PEM" || app.BaseURL != "" {
		t.Errorf("app %+v, %v", app, err)
	}
	for key, data := range map[string]map[string][]byte{
		GitHubAppIDKey:             {GitHubAppIDKey: []byte("twelve"), GitHubAppInstallationIDKey: []byte("34"), GitHubAppPrivateKeyKey: []byte("PEM")},
		GitHubAppInstallationIDKey: {GitHubAppIDKey: []byte("12"), GitHubAppPrivateKeyKey: []byte("PEM")},
		GitHubAppPrivateKeyKey:     {GitHubAppIDKey: []byte("12"), GitHubAppInstallationIDKey: []byte("34")},
	} {
		if _, err := GitHubAppOf(data); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("error %v, want one naming %s", err, key)
		}
	}
}

// An App's tokens go to its own GitHub only: a repository on another host (or over plain
// HTTP, or SSH) gets none, and no token is even minted for it.
func TestGitHubAppTokensGoOnlyToItsGitHub(t *testing.T) {
	public := &GitHubApp{ID: 1, InstallationID: 2, PrivateKey: []byte("not a key")}
	enterprise := &GitHubApp{ID: 1, InstallationID: 2, PrivateKey: []byte("not a key"), BaseURL: "https://ghe.example.com/api/v3"}
	for _, tc := range []struct {
		app  *GitHubApp
		repo string
		ok   bool
	}{
		{public, "https://github.com/org/repo.git", true},
		{public, "https://GitHub.com/org/repo", true},
		{public, "https://evil.example/org/repo.git", false},
		{public, "https://github.com.evil.example/org/repo.git", false},
		{public, "http://github.com/org/repo.git", false},
		{public, "git@github.com:org/repo.git", false},
		{enterprise, "https://ghe.example.com/org/repo.git", true},
		{enterprise, "https://github.com/org/repo.git", false},
		// A server on plain HTTP (as the GitRepo suite's stands in for one): its host name only.
		{&GitHubApp{BaseURL: "http://127.0.0.1:8080"}, "http://127.0.0.1:9090/org/repo.git", true},
		{&GitHubApp{BaseURL: "http://127.0.0.1:8080"}, "http://10.0.0.1:9090/org/repo.git", false},
	} {
		err := tc.app.ServesURL(tc.repo)
		if (err == nil) != tc.ok {
			t.Errorf("%s with base %q: %v", tc.repo, tc.app.BaseURL, err)
		}
	}
	// Through the clone's auth: refused before any token is asked for (the key is no key, so
	// asking would fail with another error).
	_, err := Source{URL: "https://evil.example/org/repo.git", Auth: Auth{GitHubApp: public}}.method(context.Background())
	if err == nil || !strings.Contains(err.Error(), "its tokens are for https://github.com, not https://evil.example") {
		t.Errorf("a repository elsewhere: %v", err)
	}
}
