package gitsource

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/bradleyfalzon/ghinstallation/v2"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

// Keys of a GitRepo's credentials Secret that make it a GitHub App's (as on Fleet), and ours:
// the API's base URL, for GitHub Enterprise (default https://api.github.com).
const (
	GitHubAppIDKey             = "github_app_id"
	GitHubAppInstallationIDKey = "github_app_installation_id"
	GitHubAppPrivateKeyKey     = "github_app_private_key"
	GitHubAppBaseURLKey        = "github_app_base_url"
)

// GitHubApp is a GitHub App installation that clones as itself: the controller trades its
// private key for an installation token, which authenticates as user x-access-token.
type GitHubApp struct {
	ID, InstallationID int64
	PrivateKey         []byte
	// BaseURL is the GitHub API's ("" for api.github.com).
	BaseURL string
}

// GitHubAppOf reads a GitHub App from a Secret's data (nil when the keys are absent).
func GitHubAppOf(data map[string][]byte) (*GitHubApp, error) {
	id, inst, key := data[GitHubAppIDKey], data[GitHubAppInstallationIDKey], data[GitHubAppPrivateKeyKey]
	if len(id) == 0 && len(inst) == 0 && len(key) == 0 {
		return nil, nil
	}
	app := &GitHubApp{PrivateKey: key, BaseURL: string(data[GitHubAppBaseURLKey])}
	var err error
	if app.ID, err = strconv.ParseInt(string(id), 10, 64); err != nil {
		return nil, fmt.Errorf("%s: not a number: %q", GitHubAppIDKey, id)
	}
	if app.InstallationID, err = strconv.ParseInt(string(inst), 10, 64); err != nil {
		return nil, fmt.Errorf("%s: not a number: %q", GitHubAppInstallationIDKey, inst)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%s is empty", GitHubAppPrivateKeyKey)
	}
	return app, nil
}

// ServesURL says whether the App's installation tokens are for the repository at repoURL: its
// scheme and host name are those of the GitHub the App belongs to (https://github.com, or a
// GitHub Enterprise server as its BaseURL names it, with or without an "api." prefix). A token
// is valid for every repository the installation may read, so it goes to no other host: a
// GitRepo naming the App's Secret could otherwise send it to a server of its choosing.
func (a *GitHubApp) ServesURL(repoURL string) error {
	api := "https://api.github.com"
	if a.BaseURL != "" {
		api = a.BaseURL
	}
	u, err := url.Parse(api)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("%s %q: not a URL", GitHubAppBaseURLKey, a.BaseURL)
	}
	apiHost := strings.ToLower(u.Hostname())
	gitHost := strings.TrimPrefix(apiHost, "api.")
	ep, err := transport.NewEndpoint(repoURL)
	if err != nil {
		return err
	}
	host := strings.ToLower(ep.Host)
	if ep.Protocol != u.Scheme || (host != apiHost && host != gitHost) {
		return fmt.Errorf("github app %d: its tokens are for %s://%s, not %s://%s: none is sent", a.ID, u.Scheme, gitHost, ep.Protocol, ep.Host)
	}
	return nil
}

// appTransports keeps one token source per App installation and key: a token lasts an hour,
// and a poll every few seconds must not ask GitHub for a new one each time.
var appTransports sync.Map

// token is an installation token of the App (reused until it nears expiry).
func (a *GitHubApp) token(ctx context.Context) (string, error) {
	key := fmt.Sprintf("%x", sha256.Sum256([]byte(fmt.Sprintf("%d\x00%d\x00%s\x00%s", a.ID, a.InstallationID, a.BaseURL, a.PrivateKey))))
	v, ok := appTransports.Load(key)
	if !ok {
		tr, err := ghinstallation.New(http.DefaultTransport, a.ID, a.InstallationID, a.PrivateKey)
		if err != nil {
			return "", fmt.Errorf("github app %d: %w", a.ID, err)
		}
		if a.BaseURL != "" {
			tr.BaseURL = a.BaseURL
		}
		v, _ = appTransports.LoadOrStore(key, tr)
	}
	t, err := v.(*ghinstallation.Transport).Token(ctx)
	if err != nil {
		return "", fmt.Errorf("github app %d, installation %d: %w", a.ID, a.InstallationID, err)
	}
	return t, nil
}
