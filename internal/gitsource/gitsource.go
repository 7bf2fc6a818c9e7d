// Package gitsource talks to git servers with go-git: it finds the commit a branch or revision
// points at (ls-remote) and checks one out. The GitRepo controller, its in-process runner and
// `fleet gitcloner` use it.
package gitsource

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage/memory"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// DefaultBranch is used when a GitRepo names neither branch nor revision.
const DefaultBranch = "master"

// Source is a repository and what of it to take.
type Source struct {
	URL string
	// Branch is followed; Revision (a commit or tag), when set, pins instead.
	Branch, Revision string
	Auth             Auth
	// CABundle is PEM of CAs to trust for HTTPS; InsecureSkipTLSVerify trusts any certificate.
	CABundle              []byte
	InsecureSkipTLSVerify bool
}

// Auth are credentials: basic auth for HTTP(S), or an SSH key (with known_hosts; without it
// any host key is refused, unless InsecureIgnoreHostKey).
type Auth struct {
	Username, Password string
	SSHPrivateKey      []byte
	KnownHosts         []byte
	// InsecureIgnoreHostKey accepts any SSH host key when KnownHosts is empty (the fleet chart's
	// insecureSkipHostKeyChecks).
	InsecureIgnoreHostKey bool
	// GitHubApp, when set, authenticates HTTPS with an installation token of the App.
	GitHubApp *GitHubApp
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// method returns go-git's auth for the source's URL.
func (s Source) method(ctx context.Context) (transport.AuthMethod, error) {
	a := s.Auth
	if a.GitHubApp != nil {
		if err := a.GitHubApp.ServesURL(s.URL); err != nil {
			return nil, err
		}
		token, err := a.GitHubApp.token(ctx)
		if err != nil {
			return nil, err
		}
		return &http.BasicAuth{Username: "x-access-token", Password: token}, nil
	}
	if len(a.SSHPrivateKey) > 0 {
		user := a.Username
		if user == "" {
			user = "git"
			if ep, err := transport.NewEndpoint(s.URL); err == nil && ep.User != "" {
				user = ep.User
			}
		}
		keys, err := gitssh.NewPublicKeys(user, a.SSHPrivateKey, a.Password)
		if err != nil {
			return nil, fmt.Errorf("ssh private key: %w", err)
		}
		if len(a.KnownHosts) == 0 && !a.InsecureIgnoreHostKey {
			return nil, errors.New("ssh: no known_hosts to check the server's host key (none in the GitRepo's secret or the known-hosts ConfigMap) and insecureSkipHostKeyChecks is false")
		}
		cb, err := HostKeyCallback(a.KnownHosts, a.InsecureIgnoreHostKey)
		if err != nil {
			return nil, err
		}
		keys.HostKeyCallback = cb
		return keys, nil
	}
	if a.Username != "" || a.Password != "" {
		return &http.BasicAuth{Username: a.Username, Password: a.Password}, nil
	}
	return nil, nil
}

// HostKeyCallback checks SSH host keys against knownHosts (known_hosts lines). With
// trustUnknown, a host knownHosts does not name is trusted whatever its key (the fleet chart's
// insecureSkipHostKeyChecks); a named host with another key is refused all the same.
func HostKeyCallback(knownHosts []byte, trustUnknown bool) (ssh.HostKeyCallback, error) {
	cb, err := knownHostsCallback(knownHosts)
	if err != nil || !trustUnknown {
		return cb, err
	}
	return func(host string, remote net.Addr, key ssh.PublicKey) error {
		err := cb(host, remote, key)
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) && len(ke.Want) == 0 {
			return nil
		}
		return err
	}, nil
}

func knownHostsCallback(knownHosts []byte) (ssh.HostKeyCallback, error) {
	f, err := os.CreateTemp("", "known_hosts-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(knownHosts); err != nil {
		f.Close()
		return nil, err
	}
	f.Close()
	cb, err := knownhosts.New(f.Name())
	if err != nil {
		return nil, fmt.Errorf("known_hosts: %w", err)
	}
	return cb, nil
}

// LatestCommit returns the commit the source's branch (or revision) points at now.
func latestCommit(ctx context.Context, s Source) (string, error) {
	if fullSHA.MatchString(s.Revision) {
		return s.Revision, nil
	}
	auth, err := s.method(ctx)
	if err != nil {
		return "", err
	}
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, CABundle: s.CABundle, InsecureSkipTLS: s.InsecureSkipTLSVerify})
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", Redact(s.URL), err)
	}
	want := map[plumbing.ReferenceName]bool{}
	if s.Revision != "" {
		want[plumbing.NewTagReferenceName(s.Revision)] = true
		want[plumbing.NewBranchReferenceName(s.Revision)] = true
	} else {
		branch := s.Branch
		if branch == "" {
			branch = DefaultBranch
		}
		want[plumbing.NewBranchReferenceName(branch)] = true
	}
	var found string
	for _, r := range refs {
		if !want[r.Name()] {
			continue
		}
		// An annotated tag is listed with its peeled commit as <tag>^{}; go-git lists the tag
		// object, which the checkout resolves.
		found = r.Hash().String()
		if r.Name().IsBranch() {
			break
		}
	}
	if found == "" {
		what := "branch " + s.Branch
		if s.Branch == "" {
			what = "branch " + DefaultBranch
		}
		if s.Revision != "" {
			what = "revision " + s.Revision
		}
		return "", fmt.Errorf("%s not found in %s", what, Redact(s.URL))
	}
	return found, nil
}

// LatestCommit is latestCommit with no credential of the URL in its error.
func LatestCommit(ctx context.Context, s Source) (string, error) {
	out, err := latestCommit(ctx, s)
	return out, scrub(err)
}

// Checkout clones the source into dir (which must not exist or be empty) and checks out commit
// (empty: the branch's head).
func checkout(ctx context.Context, s Source, dir, commit string) (string, error) {
	auth, err := s.method(ctx)
	if err != nil {
		return "", err
	}
	opts := &git.CloneOptions{URL: s.URL, Auth: auth, CABundle: s.CABundle, InsecureSkipTLS: s.InsecureSkipTLSVerify,
		Tags: git.NoTags}
	if s.Revision == "" {
		branch := s.Branch
		if branch == "" {
			branch = DefaultBranch
		}
		opts.ReferenceName, opts.SingleBranch = plumbing.NewBranchReferenceName(branch), true
	} else if !fullSHA.MatchString(s.Revision) {
		opts.Tags = git.AllTags
	}
	repo, err := git.PlainCloneContext(ctx, dir, false, opts)
	if err != nil {
		return "", fmt.Errorf("cloning %s: %w", Redact(s.URL), err)
	}
	target := commit
	if target == "" && s.Revision != "" {
		target = s.Revision
	}
	if target == "" {
		head, err := repo.Head()
		if err != nil {
			return "", err
		}
		wt, err := repo.Worktree()
		if err != nil {
			return "", err
		}
		if err := submodules(ctx, wt, auth); err != nil {
			return "", fmt.Errorf("submodules of %s: %w", Redact(s.URL), err)
		}
		return head.Hash().String(), nil
	}
	hash, err := repo.ResolveRevision(plumbing.Revision(target))
	if err != nil {
		return "", fmt.Errorf("revision %s of %s: %w", target, Redact(s.URL), err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return "", err
	}
	if err := wt.Checkout(&git.CheckoutOptions{Hash: *hash, Force: true}); err != nil {
		return "", fmt.Errorf("checking out %s of %s: %w", hash, Redact(s.URL), err)
	}
	if err := submodules(ctx, wt, auth); err != nil {
		return "", fmt.Errorf("submodules of %s at %s: %w", Redact(s.URL), hash, err)
	}
	return hash.String(), nil
}

// submodules checks out the submodules of the worktree at the commits it records, recursively,
// with the repository's own credentials (as Fleet's clones do).
func submodules(ctx context.Context, wt *git.Worktree, auth transport.AuthMethod) error {
	subs, err := wt.Submodules()
	if err != nil || len(subs) == 0 {
		return err
	}
	return subs.UpdateContext(ctx, &git.SubmoduleUpdateOptions{Init: true, RecurseSubmodules: git.DefaultSubmoduleRecursionDepth, Auth: auth})
}

// Checkout is checkout with no credential of the URL in its error.
func Checkout(ctx context.Context, s Source, dir, commit string) (string, error) {
	out, err := checkout(ctx, s, dir, commit)
	return out, scrub(err)
}

// SameRepo tells whether two repository URLs name the same repository, whatever the scheme,
// user, port or a trailing ".git" (webhook payloads and GitRepos spell them differently).
func SameRepo(a, b string) bool { return normalize(a) == normalize(b) && normalize(a) != "" }

// RepoKey is the same for every spelling of one repository's URL (see SameRepo); empty for none.
func RepoKey(u string) string { return normalize(u) }

func normalize(u string) string {
	u = strings.TrimSpace(strings.ToLower(u))
	for _, p := range []string{"https://", "http://", "ssh://", "git://"} {
		u = strings.TrimPrefix(u, p)
	}
	if i := strings.Index(u, "@"); i >= 0 && i < strings.IndexAny(u+"/", "/:") {
		u = u[i+1:]
	}
	// scp-like host:path and host:port/path both become host/path.
	if i := strings.Index(u, ":"); i >= 0 {
		rest := u[i+1:]
		if j := strings.Index(rest, "/"); j > 0 && isDigits(rest[:j]) {
			rest = rest[j+1:]
		}
		u = u[:i] + "/" + rest
	}
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	return u
}

func isDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

// Commit is who writes a commit and why.
type Commit struct {
	AuthorName, AuthorEmail, Message string
}

// CommitAndPush commits every change of the checkout in dir (cloned by Checkout from the
// source's branch) and pushes it to that branch. Nothing is forced: a push the server refuses
// (the branch moved meanwhile) is an error, and the next attempt starts from a new checkout.
func commitAndPush(ctx context.Context, s Source, dir string, c Commit) (string, error) {
	auth, err := s.method(ctx)
	if err != nil {
		return "", err
	}
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return "", err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return "", err
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return "", err
	}
	hash, err := wt.Commit(c.Message, &git.CommitOptions{Author: &object.Signature{Name: c.AuthorName, Email: c.AuthorEmail, When: time.Now()}})
	if err != nil {
		return "", fmt.Errorf("committing in %s: %w", Redact(s.URL), err)
	}
	branch := s.Branch
	if branch == "" {
		branch = DefaultBranch
	}
	ref := plumbing.NewBranchReferenceName(branch)
	err = repo.PushContext(ctx, &git.PushOptions{RemoteName: git.DefaultRemoteName, Auth: auth, CABundle: s.CABundle,
		InsecureSkipTLS: s.InsecureSkipTLSVerify, RefSpecs: []config.RefSpec{config.RefSpec(ref + ":" + ref)}})
	if err != nil {
		return "", fmt.Errorf("pushing to branch %s of %s: %w", branch, Redact(s.URL), err)
	}
	return hash.String(), nil
}

// CommitAndPush is commitAndPush with no credential of the URL in its error.
func CommitAndPush(ctx context.Context, s Source, dir string, c Commit) (string, error) {
	out, err := commitAndPush(ctx, s, dir, c)
	return out, scrub(err)
}

// Redact is a repository URL without the credentials it may carry (https://user:token@host/...):
// what may be shown in status, events, logs and metrics.
func Redact(repo string) string {
	u, err := url.Parse(repo)
	if err != nil || u.User == nil || u.Scheme == "" {
		return repo
	}
	u.User = nil
	return u.String()
}

// credentialsInURL matches the user information of a URL in text.
var credentialsInURL = regexp.MustCompile(`(://)[^/\s@]+@`)

// RedactText removes the user information (user names, tokens, passwords) of every URL in msg.
func RedactText(msg string) string { return credentialsInURL.ReplaceAllString(msg, "$1") }

// scrub keeps err (for errors.Is and As) but shows it without URL credentials: errors of git
// and HTTP libraries can quote the URL they were given.
func scrub(err error) error {
	if err == nil {
		return nil
	}
	if msg := RedactText(err.Error()); msg != err.Error() {
		return &redacted{err: err, msg: msg}
	}
	return err
}

type redacted struct {
	err error
	msg string
}

func (r *redacted) Error() string { return r.msg }
func (r *redacted) Unwrap() error { return r.err }
