// Package ui is `fleet ui`: a web UI for Fleet without Rancher, served from the one binary. It
// watches GitRepos, HelmOps, Bundles, BundleDeployments, Clusters, ClusterGroups and Rollouts
// with the viewer's own credential, aggregates pages server-side from those caches (no page
// ships more than maxRows clusters per bundle), pushes each open page again over server-sent
// events when something it shows changes, and acts (pause, resume, redeploy, approve, abort) as
// the viewer, showing the apiserver's refusal when the viewer may not. Pages are html/template;
// the one script and stylesheet are embedded.
package ui

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/lru"

	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

//go:embed templates/*.html static/*
var assets embed.FS

// staticFiles serves the embedded script and stylesheet.
var staticFiles = func() http.Handler {
	static, _ := fs.Sub(assets, "static")
	return http.StripPrefix("/static/", http.FileServerFS(static))
}()

// debounce gathers a burst of changes into one push per page.
const debounce = 300 * time.Millisecond

// maxStreams is how many live-update streams one Server (one viewer identity) keeps open at
// once: each open page holds one. A page past it is still served, without live updates.
const maxStreams = 32

// Server serves the UI for one viewer (the credential of cfg).
type Server struct {
	api fleetcontrollers.Interface
	// secrets reads the values Secrets of the revisions a diff renders, with the viewer's rights.
	secrets corev1client.SecretsGetter
	k       *kinds
	tmpl    *template.Template
	mu      sync.Mutex
	subs    map[chan struct{}]struct{}
	// streams are the caps an open live-update stream counts against: this Server's own, and
	// (in the cluster) the one all viewers share.
	streams []*slots
	// signOut shows the sign-out button (viewers who signed in).
	signOut bool
	// diffs are the diffs rendered lately (keptDiff, by what they compare).
	diffs *lru.Cache
}

// slots counts what is open against a cap.
type slots struct {
	mu     sync.Mutex
	n, max int
}

// templateFuncs are what the pages' templates may call.
var templateFuncs = template.FuncMap{"lower": strings.ToLower, "join": strings.Join}

func newSlots(max int) *slots { return &slots{max: max} }

// take opens one when fewer than max are open.
func (s *slots) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.n >= s.max {
		return false
	}
	s.n++
	return true
}

func (s *slots) give() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n--
}

func (s *slots) open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// takeAll opens one of each, or none: it says which cap was full.
func takeAll(caps []*slots) (release func(), ok bool) {
	for i, c := range caps {
		if !c.take() {
			for _, t := range caps[:i] {
				t.give()
			}
			return nil, false
		}
	}
	return func() {
		for _, c := range caps {
			c.give()
		}
	}, true
}

// New watches the Fleet kinds with cfg's credential until ctx ends.
func New(ctx context.Context, cfg *rest.Config) (*Server, error) {
	ff, err := fleetfactory.NewFactoryFromConfig(cfg)
	if err != nil {
		return nil, err
	}
	tmpl, err := template.New("ui").Funcs(templateFuncs).ParseFS(assets, "templates/*.html")
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &Server{api: ff.Fleet().V1alpha1(), secrets: kube.CoreV1(), tmpl: tmpl, subs: map[chan struct{}]struct{}{}, streams: []*slots{newSlots(maxStreams)}, diffs: lru.New(keptDiffs)}
	s.k = watchAll(ctx, s.api, s.changed)
	return s, nil
}

// changed tells every open page that something changed.
func (s *Server) changed() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Handler serves the pages, the live updates, the actions and the assets.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /static/", staticFiles)
	mux.HandleFunc("GET /events", s.events)
	mux.HandleFunc("POST /actions", s.action)
	mux.HandleFunc("GET /", s.page)
	return mux
}

// page is a whole page: the layout around the part the live updates replace.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	title, body, ok := s.render(r.URL.RequestURI())
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'self'")
	_ = s.tmpl.ExecuteTemplate(w, "layout.html", map[string]any{"Title": title, "Body": template.HTML(body), "Path": r.URL.RequestURI(), "SignOut": s.signOut})
}

// render is the live part of the page at uri (a path and query), and its title.
func (s *Server) render(uri string) (string, string, bool) {
	var name, title string
	var data any
	u, err := url.Parse(uri)
	if err != nil {
		return "", "", false
	}
	path := u.Path
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/":
		name, title, data = "overview.html", "Overview", s.overview()
	case path == "/clusters":
		page, _ := strconv.Atoi(u.Query().Get("page"))
		name, title, data = "clusters.html", "Clusters", s.clusterPage(page)
	case path == "/clustergroups":
		name, title, data = "groups.html", "Cluster groups", s.groups()
	case path == "/alerts":
		name, title, data = "alerts.html", "Alerts", s.alerts()
	case len(parts) == 3 && parts[0] == "clusters":
		name, title, data = "cluster.html", "Cluster "+parts[1]+"/"+parts[2], s.clusterHistoryPage(parts[1], parts[2])
	case len(parts) == 4 && parts[0] == "bundles" && parts[3] == "diff":
		name, title, data = "diff.html", "Bundle "+parts[1]+"/"+parts[2]+": diff", s.diffPage(parts[1], parts[2], u.Query())
	case len(parts) == 4 && parts[0] == "bundles" && parts[3] == "history":
		name, title, data = "timeline.html", "Bundle "+parts[1]+"/"+parts[2], s.timelinePage(parts[1], parts[2])
	case len(parts) == 3 && (parts[0] == "gitrepos" || parts[0] == "helmops"):
		kind := map[string]string{"gitrepos": "GitRepo", "helmops": "HelmOp"}[parts[0]]
		name, title, data = "repo.html", kind+" "+parts[1]+"/"+parts[2], s.repo(kind, parts[1], parts[2])
	default:
		return "", "", false
	}
	var buf bytes.Buffer
	if err := s.tmpl.ExecuteTemplate(&buf, name, map[string]any{"V": data, "Problems": s.k.problems()}); err != nil {
		return title, template.HTMLEscapeString(err.Error()), true
	}
	return title, buf.String(), true
}

// events pushes the live part of the page at ?path= again whenever something changed (at most
// once per debounce), as server-sent events.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	path := r.URL.Query().Get("path")
	if _, _, ok := s.render(path); !ok {
		http.NotFound(w, r)
		return
	}
	release, ok := takeAll(s.streams)
	if !ok {
		// The script's EventSource retries on its own; the page keeps what it shows.
		http.Error(w, "too many live pages open: close some", http.StatusServiceUnavailable)
		return
	}
	defer release()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}()
	fmt.Fprint(w, ": live\n\n")
	flusher.Flush()
	last := ""
	for {
		select {
		case <-r.Context().Done():
			return
		case <-ch:
		}
		time.Sleep(debounce)
		_, body, _ := s.render(path)
		if body == last {
			continue
		}
		last = body
		writeEvent(w, "page", body)
		flusher.Flush()
	}
}

// writeEvent writes one server-sent event. Its body holds what agents and tenants wrote: every
// line break of it (\r\n, \r and \n all end a line in the event stream) starts a data line
// of its own, so no text of theirs begins a field (event:, id:, retry:) of the stream.
func writeEvent(w io.Writer, event, body string) {
	body = strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(body)
	var b strings.Builder
	b.WriteString("event: " + event + "\n")
	for _, l := range strings.Split(body, "\n") {
		b.WriteString("data: " + l + "\n")
	}
	b.WriteString("\n")
	_, _ = io.WriteString(w, b.String())
}

// Run serves the UI on addr until ctx ends, to whoever holds this run's secret: ready gets the
// URL to open, which carries it once (as notebook servers do); the browser keeps it in a cookie.
// Another user of this machine, or a page that rebinds a name of its own to 127.0.0.1, can
// reach the port but not act with the kubeconfig's credential.
func Run(ctx context.Context, addr string, cfg *rest.Config, ready func(url string)) error {
	s, err := New(ctx, cfg)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	secret, err := randomHex()
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: localOnly(l.Addr().String(), secret, s.Handler()), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if ready != nil {
		ready("http://" + l.Addr().String() + "/?" + secretParam + "=" + secret)
	}
	if err := srv.Serve(l); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}

// secretParam is the query parameter of Run's URL that carries the run's secret.
const secretParam = "token"

// randomHex is 32 random bytes, hex-encoded.
func randomHex() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// localOnly refuses requests for another host than the one served (a page elsewhere pointing a
// name of its own at 127.0.0.1 must not act with the viewer's credential), requests without the
// run's secret (in the URL Run printed, then in a cookie of this port's own name) and, for
// actions, any not sent by the UI's own script (another site's form cannot set its header).
func localOnly(addr, secret string, next http.Handler) http.Handler {
	_, port, _ := net.SplitHostPort(addr)
	allowed := map[string]bool{addr: true, "localhost:" + port: true, "127.0.0.1:" + port: true, "[::1]:" + port: true}
	cookie := "fleet-ui-" + port
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allowed[r.Host] {
			http.Error(w, "fleet ui answers only for "+addr, http.StatusForbidden)
			return
		}
		if given := r.URL.Query().Get(secretParam); given != "" && r.Method == http.MethodGet {
			if !sameSecret(given, secret) {
				http.Error(w, "this is not the URL fleet ui printed", http.StatusForbidden)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: cookie, Value: secret, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del(secretParam)
			to := url.URL{Path: r.URL.Path, RawQuery: q.Encode()}
			http.Redirect(w, r, to.String(), http.StatusSeeOther)
			return
		}
		if c, err := r.Cookie(cookie); err != nil || !sameSecret(c.Value, secret) {
			http.Error(w, "open the URL fleet ui printed (it carries this run's secret)", http.StatusForbidden)
			return
		}
		if r.Method == http.MethodPost && !fromOwnScript(r) {
			http.Error(w, "actions are taken from the UI's own pages only", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// fromOwnScript is a request the UI's script sent: it sets a header another site's form cannot,
// and the browser does not call it cross-site.
func fromOwnScript(r *http.Request) bool {
	return r.Header.Get("X-Fleet-UI") == "1" && r.Header.Get("Sec-Fetch-Site") != "cross-site"
}

// sameSecret compares in constant time.
func sameSecret(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}
