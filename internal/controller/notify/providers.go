package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/go-github/v88/github"

	"github.com/fleetgo/fleet/internal/netguard"
	"github.com/fleetgo/fleet/internal/notify"
	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Headers of a webhook provider's requests.
const (
	// SignatureHeader holds "sha256=" and the hex HMAC-SHA256 of the body under the Secret's
	// hmacKey.
	SignatureHeader = "X-Fleet-Signature"
	// KeyHeader holds the message's key: a receiver that saw it already has the message.
	KeyHeader = "X-Fleet-Message-Key"
)

// target is where and with what an Alert's provider sends.
type target struct {
	p       *fleet.AlertProvider
	address string
	token   string
	hmacKey []byte
}

// targetOf reads the Alert's provider and its Secret: the Secret must be one its namespace's
// owner allows for notifications, and no credential of the manager or a cluster.
func (h *handler) targetOf(a *fleet.Alert) (*target, error) {
	p, err := h.Providers.Cache().Get(a.Namespace, a.Spec.ProviderRef)
	if err != nil {
		return nil, fmt.Errorf("spec.providerRef: alertprovider %s/%s: %w", a.Namespace, a.Spec.ProviderRef, err)
	}
	t := &target{p: p, address: p.Spec.Address}
	if p.Spec.SecretName != "" {
		s, err := h.Secrets.Get(a.Namespace, p.Spec.SecretName)
		if err != nil {
			return nil, fmt.Errorf("alertprovider %s spec.secretName: %w", p.Name, err)
		}
		if err := h.Guard.Check(s, "alertprovider "+p.Name+" spec.secretName"); err != nil {
			return nil, err
		}
		if !secretuse.AllowedUse(s, fleet.UseNotifications) {
			return nil, secretuse.NotAllowed("Secret", s, "alertprovider "+p.Name+" spec.secretName",
				"it is not annotated "+secretuse.UsesAnnotation+": "+fleet.UseNotifications)
		}
		t.token, t.hmacKey = string(s.Data["token"]), s.Data["hmacKey"]
		if addr := string(s.Data["address"]); addr != "" {
			t.address = addr
		}
	}
	return t, nil
}

// send delivers e for Alert a through its provider.
func (h *handler) send(ctx context.Context, a *fleet.Alert, e notify.Event) error {
	t, err := h.targetOf(a)
	if err != nil {
		return err
	}
	switch t.p.Spec.Type {
	case fleet.ProviderSlack:
		return t.post(ctx, map[string]any{"text": text(t.p, a, e), "channel": t.p.Spec.Channel}, nil)
	case fleet.ProviderMSTeams:
		return t.post(ctx, map[string]any{"@type": "MessageCard", "@context": "https://schema.org/extensions",
			"summary": e.Summary, "text": strings.ReplaceAll(text(t.p, a, e), "\n", "\n\n")}, nil)
	case fleet.ProviderWebhook:
		return t.post(ctx, payload(t.p, a, e), map[string]string{KeyHeader: e.Key})
	case fleet.ProviderGitHub, fleet.ProviderGitLab:
		if e.CommitState == "" {
			return fmt.Errorf("alertprovider %s is a %s provider: it takes commit checks only, no %s message", t.p.Name, t.p.Spec.Type, e.Reason)
		}
		if t.p.Spec.Type == fleet.ProviderGitHub {
			return t.github(ctx, e)
		}
		return t.gitlab(ctx, e)
	}
	return fmt.Errorf("alertprovider %s spec.type: %q is not a provider type", t.p.Name, t.p.Spec.Type)
}

// text is a chat message: the summary line, the failures by cause, a link.
func text(p *fleet.AlertProvider, a *fleet.Alert, e notify.Event) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s] %s", e.Reason, e.Summary)
	for _, g := range e.Groups {
		fmt.Fprintf(&b, "\n%d failed: %s (%s", g.Count, g.Signature, strings.Join(g.Clusters, ", "))
		if g.Count > len(g.Clusters) {
			fmt.Fprintf(&b, " and %d more", g.Count-len(g.Clusters))
		}
		b.WriteString(")")
	}
	if link := link(p, a, e); link != "" {
		b.WriteString("\n" + link)
	}
	return b.String()
}

// link is the UI page of the event's source, when the provider names the UI.
func link(p *fleet.AlertProvider, a *fleet.Alert, e notify.Event) string {
	if p.Spec.UIURL == "" {
		return ""
	}
	base := strings.TrimSuffix(p.Spec.UIURL, "/")
	if e.Source == notify.ClustersSource {
		return base + "/clusters"
	}
	source, _, _ := strings.Cut(e.Source, "#") // a GitRepo's commit, drift or readiness: its page
	kind, name, _ := strings.Cut(source, "/")
	page := map[string]string{"GitRepo": "gitrepos", "Bundle": "bundles", "HelmOp": "helmops"}[kind]
	return base + "/" + page + "/" + url.PathEscape(a.Namespace) + "/" + url.PathEscape(name)
}

// payload is a webhook's body: the event, whole.
func payload(p *fleet.AlertProvider, a *fleet.Alert, e notify.Event) map[string]any {
	return map[string]any{"alert": a.Name, "namespace": a.Namespace, "source": e.Source, "key": e.Key, "reason": e.Reason,
		"severity": e.Severity, "summary": e.Summary, "counts": e.Counts, "groups": e.Groups, "link": link(p, a, e)}
}

// post sends body as JSON to the address (signed when the Secret has an hmacKey).
func (t *target) post(ctx context.Context, body any, headers map[string]string) error {
	if t.address == "" {
		return fmt.Errorf("alertprovider %s: no address (spec.address, or the Secret's address key)", t.p.Name)
	}
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.address, bytes.NewReader(data))
	if err != nil {
		// The address is not repeated: it may be a credential.
		return fmt.Errorf("alertprovider %s address: not a URL the manager can post to", t.p.Name)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if len(t.hmacKey) > 0 {
		m := hmac.New(sha256.New, t.hmacKey)
		m.Write(data)
		req.Header.Set(SignatureHeader, "sha256="+hex.EncodeToString(m.Sum(nil)))
	}
	return t.do(req)
}

func (t *target) do(req *http.Request) error {
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("alertprovider %s: %s %s: %w", t.p.Name, req.Method, redact(req.URL), cause(err))
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode/100 != 2 {
		// The answer's body is not kept: it is the endpoint's, and statuses are read by many.
		return fmt.Errorf("alertprovider %s: %s %s: %w", t.p.Name, req.Method, redact(req.URL), refused(resp.StatusCode, ""))
	}
	return nil
}

// github sets the commit status through GitHub's API.
func (t *target) github(ctx context.Context, e notify.Event) error {
	owner, repo, err := ownerRepo(e.Repo)
	if err != nil {
		return err
	}
	opts := []github.ClientOptionsFunc{github.WithHTTPClient(client), github.WithAuthToken(t.token)}
	if t.address != "" {
		base := strings.TrimSuffix(t.address, "/") + "/"
		opts = append(opts, github.WithURLs(&base, nil))
	}
	c, err := github.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("alertprovider %s address: %w", t.p.Name, err)
	}
	_, _, err = c.Repositories.CreateStatus(ctx, owner, repo, e.Commit, github.RepoStatus{State: &e.CommitState,
		Description: github.Ptr(truncate(e.Summary, 140)), Context: &e.Context})
	if err != nil {
		var gh *github.ErrorResponse
		if errors.As(err, &gh) && gh.Response != nil {
			return fmt.Errorf("alertprovider %s: commit status of %s/%s@%s: %w", t.p.Name, owner, repo, e.Commit, refused(gh.Response.StatusCode, ""))
		}
		return fmt.Errorf("alertprovider %s: commit status of %s/%s@%s: %w", t.p.Name, owner, repo, e.Commit, cause(err))
	}
	return nil
}

// gitlab sets the commit status through GitLab's API (POST /projects/:id/statuses/:sha).
func (t *target) gitlab(ctx context.Context, e notify.Event) error {
	owner, repo, err := ownerRepo(e.Repo)
	if err != nil {
		return err
	}
	base := strings.TrimSuffix(t.address, "/")
	if base == "" {
		base = "https://gitlab.com/api/v4"
	}
	state := map[string]string{notify.CommitPending: "running", notify.CommitSuccess: "success", notify.CommitFailure: "failed"}[e.CommitState]
	q := url.Values{"state": {state}, "name": {e.Context}, "description": {truncate(e.Summary, 255)}}
	u := base + "/projects/" + url.PathEscape(owner+"/"+repo) + "/statuses/" + url.PathEscape(e.Commit) + "?" + q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("PRIVATE-TOKEN", t.token)
	return t.do(req)
}

// ownerRepo are the owner (group path) and name of the repository at a git URL.
func ownerRepo(repoURL string) (string, string, error) {
	s := strings.TrimSuffix(strings.TrimSuffix(repoURL, "/"), ".git")
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
		_, s, _ = strings.Cut(s, "/")
	} else if _, path, ok := strings.Cut(s, ":"); ok { // scp form: git@host:owner/repo
		s = path
	}
	i := strings.LastIndex(s, "/")
	if i <= 0 {
		return "", "", fmt.Errorf("repository %q: no owner/name in it for a commit status", repoURL)
	}
	return s[:i], s[i+1:], nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// redact is a URL without its query or credentials (a webhook's path may be its secret too:
// only scheme and host are named).
func redact(u *url.URL) string { return u.Scheme + "://" + u.Host + "/..." }

// cause is err without the URL net/http repeats in it (it may hold a credential).
func cause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// client is the notifier's: straight to the address (no proxy from the environment), no
// redirect followed, no connection to a link-local, unspecified or multicast address (cloud
// metadata services live there; an AlertProvider's address is its writer's choice).
var client = &http.Client{
	Timeout: sendTimeout,
	Transport: &http.Transport{Proxy: nil, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 10 * time.Second, MaxIdleConns: 16,
		IdleConnTimeout: 90 * time.Second, DialContext: (&net.Dialer{Timeout: sendTimeout,
			Control: netguard.Refuse(netguard.Unreachable, errors.New("a link-local, unspecified or multicast address"))}).DialContext},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}
