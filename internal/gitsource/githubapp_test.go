package gitsource

import (
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
