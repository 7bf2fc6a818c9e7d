package localserver

import (
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// gitHTTPBackend is Debian's location of git's smart HTTP server.
const gitHTTPBackend = "/usr/lib/git-core/git-http-backend"

// GitServer serves bare repositories under Root over git's smart HTTP protocol.
type GitServer struct {
	// Root holds the bare repositories, as NAME.git folders.
	Root string
	// URL is the server's base URL; a repository is at URL/NAME.git.
	URL string
	srv *httptest.Server
	// credentialed counts requests that carried an Authorization header.
	credentialed atomic.Int64
}

// CredentialedRequests is how many requests to the server carried credentials (an
// Authorization header), whether or not the server asked for them.
func (g *GitServer) CredentialedRequests() int64 { return g.credentialed.Load() }

// counting counts g's requests that carry credentials, then serves them with next.
func (g *GitServer) counting(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "" {
			g.credentialed.Add(1)
		}
		next.ServeHTTP(w, r)
	})
}

// StartGitServer serves the bare repositories under root (created if missing), requiring auth
// when it is set. Stop it with Close.
func StartGitServer(root string, auth BasicAuth) (*GitServer, error) {
	return StartGitServerOn(root, auth, nil)
}

// StartGitServerOn is StartGitServer listening on ip (loopback when nil), for clients in other
// network namespaces: pods of a real node reach it at the host's end of their link.
func StartGitServerOn(root string, auth BasicAuth, ip net.IP) (*GitServer, error) {
	h, err := gitHandler(root)
	if err != nil {
		return nil, err
	}
	g := &GitServer{Root: root}
	srv, err := serveOn(g.counting(auth.wrap(h)), ip)
	if err != nil {
		return nil, err
	}
	g.URL, g.srv = srv.URL, srv
	return g, nil
}

// StartTLSGitServer is StartGitServer over HTTPS with a certificate of its own CA (valid for
// 127.0.0.1): ca is that CA, in PEM, for clients to trust.
func StartTLSGitServer(root string, auth BasicAuth) (g *GitServer, ca []byte, err error) {
	h, err := gitHandler(root)
	if err != nil {
		return nil, nil, err
	}
	srv := httptest.NewTLSServer(auth.wrap(h))
	ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return &GitServer{Root: root, URL: srv.URL, srv: srv}, ca, nil
}

// gitHandler runs git http-backend for the bare repositories under root (created if missing).
func gitHandler(root string) (http.Handler, error) {
	backend, err := exec.LookPath("git-http-backend")
	if err != nil {
		backend = gitHTTPBackend
	}
	if _, err := os.Stat(backend); err != nil {
		return nil, fmt.Errorf("git server: %s not found (install git): %w", backend, err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	return &cgi.Handler{
		Path: backend,
		Env: []string{
			"GIT_PROJECT_ROOT=" + root,
			"GIT_HTTP_EXPORT_ALL=1",
			// Pushes are allowed without REMOTE_USER, so tests can push over HTTP too.
			"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=http.receivepack", "GIT_CONFIG_VALUE_0=true",
		},
	}, nil
}

// serveOn starts an HTTP test server on ip (loopback when nil) at a free port.
func serveOn(h http.Handler, ip net.IP) (*httptest.Server, error) {
	if ip == nil {
		return httptest.NewServer(h), nil
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return nil, err
	}
	srv := httptest.NewUnstartedServer(h)
	srv.Listener.Close()
	srv.Listener = l
	srv.Start()
	return srv, nil
}

// Close stops the server.
func (g *GitServer) Close() { g.srv.Close() }

// RepoURL is the clone URL of repository name.
func (g *GitServer) RepoURL(name string) string { return g.URL + "/" + name + ".git" }

// Publish makes the files under src the content of repository name on branch, as one new
// commit, creating the repository if needed, and returns the commit's hash. It uses the git
// command, as a user pushing to a server would.
func (g *GitServer) Publish(ctx context.Context, name, branch, src, message string) (string, error) {
	bare := filepath.Join(g.Root, name+".git")
	if _, err := os.Stat(bare); os.IsNotExist(err) {
		if err := runGit(ctx, "", "init", "--bare", "--initial-branch="+branch, bare); err != nil {
			return "", err
		}
	}
	work, err := os.MkdirTemp("", "localserver-git-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(work)
	steps := [][]string{
		{"init", "--initial-branch=" + branch},
		{"remote", "add", "origin", bare},
		{"fetch", "origin"},
	}
	for _, s := range steps {
		if err := runGit(ctx, work, s...); err != nil {
			return "", err
		}
	}
	// Continue the branch's history when it exists.
	if err := runGit(ctx, work, "rev-parse", "--verify", "-q", "origin/"+branch); err == nil {
		if err := runGit(ctx, work, "reset", "-q", "--soft", "origin/"+branch); err != nil {
			return "", err
		}
	}
	if err := copyTree(src, work); err != nil {
		return "", err
	}
	for _, s := range [][]string{
		{"add", "-A"},
		{"-c", "user.name=localserver", "-c", "user.email=localserver@example.invalid", "commit", "-q", "--allow-empty", "-m", message},
		{"push", "-q", "origin", "HEAD:refs/heads/" + branch},
	} {
		if err := runGit(ctx, work, s...); err != nil {
			return "", err
		}
	}
	out, err := exec.CommandContext(ctx, "git", "-C", work, "rev-parse", "HEAD").Output()
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

func runGit(ctx context.Context, dir string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

// copyTree copies the files under src into dst, replacing what dst held (but its .git).
func copyTree(src, dst string) error {
	entries, err := os.ReadDir(dst)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != ".git" {
			if err := os.RemoveAll(filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
	}
	return os.CopyFS(dst, os.DirFS(src))
}

// StatusOK is a helper for readiness probes of the servers in this package.
func statusOK(url string) bool {
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode < 500
}
