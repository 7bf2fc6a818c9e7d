package bundlereader

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
)

// gitChartSource is a chart in a git repository: git::URL//SUBDIR?ref=REF.
type gitChartSource struct {
	repoURL string
	subdir  string
	ref     string
}

// parseGitChart reads the go-getter style reference fleet.yaml uses for charts in git.
func parseGitChart(ref string) (gitChartSource, error) {
	raw := strings.TrimPrefix(ref, "git::")
	var src gitChartSource
	if i := strings.Index(raw, "?"); i >= 0 {
		q, err := url.ParseQuery(raw[i+1:])
		if err != nil {
			return src, fmt.Errorf("helm.chart %q: %w", ref, err)
		}
		src.ref = q.Get("ref")
		raw = raw[:i]
	}
	// The subfolder follows a "//" after the scheme's own "//".
	schemeEnd := strings.Index(raw, "://")
	rest := raw
	if schemeEnd >= 0 {
		rest = raw[schemeEnd+3:]
	}
	if i := strings.Index(rest, "//"); i >= 0 {
		src.subdir = rest[i+2:]
		raw = raw[:len(raw)-len(rest)+i]
	}
	if raw == "" {
		return src, fmt.Errorf("helm.chart %q: no repository URL", ref)
	}
	if schemeEnd < 0 && !scpLike.MatchString(raw) {
		raw = "https://" + raw
	}
	src.repoURL = raw
	return src, nil
}

// scpLike matches git's user@host:path form of SSH URLs.
var scpLike = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:`)

func isSSH(u string) bool { return strings.HasPrefix(u, "ssh://") || scpLike.MatchString(u) }

// fetchGitChart clones the repository at the reference and packages the chart in its subfolder.
func fetchGitChart(ctx context.Context, ref string, updateDependencies bool, auth ChartAuth) (*embeddedChart, error) {
	src, err := parseGitChart(ref)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "fleet-gitchart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	auth = auth.forURL(ref)
	opts := &git.CloneOptions{URL: src.repoURL, InsecureSkipTLS: auth.InsecureSkipTLSVerify, CABundle: auth.GitCABundle}
	if auth.CAFile != "" {
		ca, err := os.ReadFile(auth.CAFile)
		if err != nil {
			return nil, fmt.Errorf("helm.chart %q: CAs: %w", ref, err)
		}
		opts.CABundle = append(append(slices.Clip(opts.CABundle), '\n'), ca...)
	}
	switch {
	case isSSH(src.repoURL):
		// Only the key given for the chart source: go-git would otherwise offer the keys of
		// the host's ssh-agent (a CI runner's, a developer's) to whatever server fleet.yaml names.
		if len(auth.SSHPrivateKey) == 0 {
			return nil, fmt.Errorf("helm.chart %q: an SSH chart source needs the SSH private key of its credentials Secret (ssh-privatekey); the host's ssh-agent is never used", ref)
		}
		keys, err := gitssh.NewPublicKeys("git", auth.SSHPrivateKey, "")
		if err != nil {
			return nil, fmt.Errorf("helm.chart %q: SSH private key: %w", ref, err)
		}
		opts.Auth = keys
	case auth.Username != "" || auth.Password != "":
		opts.Auth = &githttp.BasicAuth{Username: auth.Username, Password: auth.Password}
	}
	if err := cloneAt(ctx, tmp, opts, src.ref); err != nil {
		return nil, fmt.Errorf("cloning %s for helm.chart: %w", src.repoURL, err)
	}
	dir := filepath.Join(tmp, filepath.FromSlash(src.subdir))
	if rel, err := filepath.Rel(tmp, dir); err != nil || strings.HasPrefix(rel, "..") {
		return nil, fmt.Errorf("helm.chart %q: subfolder leaves the repository", ref)
	}
	return packageLocalChart(ctx, tmp, dir, updateDependencies, auth)
}

// cloneAt clones a branch or tag shallowly, or the whole history to check out a commit.
func cloneAt(ctx context.Context, dir string, opts *git.CloneOptions, ref string) error {
	if ref == "" {
		opts.Depth = 1
		_, err := git.PlainCloneContext(ctx, dir, false, opts)
		return err
	}
	for _, name := range []plumbing.ReferenceName{plumbing.NewTagReferenceName(ref), plumbing.NewBranchReferenceName(ref)} {
		o := *opts
		o.ReferenceName, o.SingleBranch, o.Depth = name, true, 1
		if _, err := git.PlainCloneContext(ctx, dir, false, &o); err == nil {
			return nil
		}
		_ = os.RemoveAll(dir)
		_ = os.MkdirAll(dir, 0o755)
	}
	repo, err := git.PlainCloneContext(ctx, dir, false, opts)
	if err != nil {
		return err
	}
	hash, err := repo.ResolveRevision(plumbing.Revision(ref))
	if err != nil {
		return fmt.Errorf("ref %q: %w", ref, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	return wt.Checkout(&git.CheckoutOptions{Hash: *hash})
}
