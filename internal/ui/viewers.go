package ui

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// How an in-cluster UI learns who its viewer is. It holds no rights of its own: every request
// acts with the viewer's own Kubernetes credential.
const (
	// AuthToken: the viewer signs in with a bearer token (a ServiceAccount token, an OIDC ID
	// token the apiserver trusts); a session cookie keeps it for idleTimeout.
	AuthToken = "token"
	// AuthHeader: an authenticating proxy in front passes the viewer's bearer token in the
	// Authorization header of every request.
	AuthHeader = "header"
)

// idleTimeout ends a viewer's session after this long without a request; a viewer's watches
// end with their last session.
const idleTimeout = 8 * time.Hour

// Cookies of the in-cluster UI.
const (
	sessionCookie = "fleet-ui-session"
	// loginCookie holds the sign-in form's anti-forgery value: a sign-in is taken only from the
	// form this UI served to the same browser, so another site cannot sign a browser in as
	// someone else (whose actions the viewer would then take unknowingly).
	loginCookie = "fleet-ui-login"
)

// Limits bound what the viewers can make the UI hold. Memory grows with Viewers: each viewer
// identity keeps one set of watches (docs/ui.md gives the budget).
type Limits struct {
	// Viewers is how many identities may be signed in at once; one more is refused until a
	// session ends.
	Viewers int
	// SessionsPerViewer is how many sessions (sign-ins, or proxy tokens) one identity keeps;
	// one more ends its least recently used.
	SessionsPerViewer int
	// Streams is how many live-update streams all viewers hold open at once (each viewer
	// holds at most maxStreams of them).
	Streams int
}

// DefaultLimits are the in-cluster UI's limits unless flags say otherwise.
var DefaultLimits = Limits{Viewers: 8, SessionsPerViewer: 8, Streams: 128}

// errFull refuses a sign-in while Limits.Viewers identities are signed in.
var errFull = errors.New("the UI serves as many viewers as it may at once: try again when one signs out or is idle")

// Viewers serves the UI to many viewers, each with their own credential. The identities the
// apiserver names (SelfSubjectReview) own the watches: every session of one identity shares them.
type Viewers struct {
	base    *rest.Config
	mode    string
	ctx     context.Context
	limits  Limits
	streams *slots
	mu      sync.Mutex
	// sessions by key: a session cookie's value (token mode) or a token's hash (header mode).
	sessions map[string]*session
	// users by identity.
	users map[string]*user
	login *template.Template
}

type session struct {
	user *user
	last time.Time
}

// user is one identity's UI: one Server, one set of watches, acting with the newest token
// any of its sessions brought.
type user struct {
	// id is the identity (the key of Viewers.users).
	id       string
	srv      *Server
	token    *tokenHolder
	sessions int
	cancel   context.CancelFunc
}

// tokenHolder is a user's newest token; every request of their UI carries it.
type tokenHolder struct {
	mu    sync.Mutex
	token string
}

func (t *tokenHolder) set(token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.token = token
}

func (t *tokenHolder) RoundTripper(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		t.mu.Lock()
		token := t.token
		t.mu.Unlock()
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+token)
		return rt.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Open is what the viewers hold open now.
type Open struct {
	// Viewers are the identities signed in (each with one set of watches).
	Viewers int
	// Sessions are their sessions.
	Sessions int
	// Streams are the live-update streams open.
	Streams int
}

// NewViewers serves viewers of the apiserver of base, whose own credential is dropped: the UI
// can do nothing with it.
func NewViewers(ctx context.Context, base *rest.Config, mode string, limits Limits) (*Viewers, error) {
	if mode != AuthToken && mode != AuthHeader {
		return nil, fmt.Errorf("auth %q: token or header", mode)
	}
	if limits.Viewers < 1 || limits.SessionsPerViewer < 1 || limits.Streams < 1 {
		return nil, fmt.Errorf("limits %+v: each at least 1", limits)
	}
	anon := rest.AnonymousClientConfig(base)
	login, err := template.ParseFS(assets, "templates/login.html")
	if err != nil {
		return nil, err
	}
	v := &Viewers{base: anon, mode: mode, ctx: ctx, limits: limits, streams: newSlots(limits.Streams),
		sessions: map[string]*session{}, users: map[string]*user{}, login: login}
	go v.expire()
	return v, nil
}

// Open is what the viewers hold open now.
func (v *Viewers) Open() Open {
	v.mu.Lock()
	defer v.mu.Unlock()
	return Open{Viewers: len(v.users), Sessions: len(v.sessions), Streams: v.streams.open()}
}

func (v *Viewers) expire() {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		select {
		case <-v.ctx.Done():
			return
		case now := <-t.C:
			v.mu.Lock()
			for k, s := range v.sessions {
				if now.Sub(s.last) > idleTimeout {
					v.endLocked(k)
				}
			}
			v.mu.Unlock()
		}
	}
}

// endLocked ends a session, and its user's watches with their last session.
func (v *Viewers) endLocked(key string) {
	s := v.sessions[key]
	if s == nil {
		return
	}
	delete(v.sessions, key)
	s.user.sessions--
	if s.user.sessions > 0 {
		return
	}
	s.user.cancel()
	delete(v.users, s.user.id)
}

// ServeHTTP signs viewers in and out and hands each request to the viewer's own UI.
func (v *Viewers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path != "/login" && !fromOwnScript(r) {
		http.Error(w, "actions are taken from the UI's own pages only", http.StatusForbidden)
		return
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/static/"):
		staticFiles.ServeHTTP(w, r)
		return
	case v.mode == AuthToken && r.URL.Path == "/login":
		v.signIn(w, r)
		return
	case r.URL.Path == "/logout" && r.Method == http.MethodPost:
		v.signOut(w, r)
		return
	}
	u, err := v.viewerOf(r)
	if err != nil {
		code := http.StatusUnauthorized
		if errors.Is(err, errFull) {
			code = http.StatusServiceUnavailable
		}
		if v.mode == AuthToken {
			v.loginPage(w, r, code, err.Error())
			return
		}
		http.Error(w, err.Error(), code)
		return
	}
	u.srv.Handler().ServeHTTP(w, r)
}

// sessionKey is the request's session: its cookie (token mode) or its token's hash (header
// mode, with the token).
func (v *Viewers) sessionKey(r *http.Request) (key, token string, err error) {
	if v.mode == AuthHeader {
		auth := r.Header.Get("Authorization")
		if !strings.HasPrefix(auth, "Bearer ") {
			return "", "", fmt.Errorf("no bearer token from the authenticating proxy")
		}
		token = strings.TrimPrefix(auth, "Bearer ")
		sum := sha256.Sum256([]byte(token))
		return "h:" + hex.EncodeToString(sum[:]), token, nil
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", "", fmt.Errorf("sign in with your Kubernetes token")
	}
	return "s:" + c.Value, "", nil
}

// viewerOf is the UI of the request's viewer.
func (v *Viewers) viewerOf(r *http.Request) (*user, error) {
	key, token, err := v.sessionKey(r)
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	s := v.sessions[key]
	if s != nil {
		s.last = time.Now()
	}
	v.mu.Unlock()
	if s != nil {
		return s.user, nil
	}
	if token == "" {
		return nil, fmt.Errorf("your session has ended: sign in again")
	}
	return v.start(key, token)
}

// identity is who the apiserver says a token belongs to. A ServiceAccount token's credential
// ID differs from token to token of one identity, and is left out.
func identity(u authenticationv1.UserInfo) string {
	groups := append([]string(nil), u.Groups...)
	sort.Strings(groups)
	var extra []string
	for k, vals := range u.Extra {
		if k == "authentication.kubernetes.io/credential-id" {
			continue
		}
		extra = append(extra, k+"="+strings.Join(vals, ","))
	}
	sort.Strings(extra)
	sum := sha256.Sum256([]byte(strings.Join([]string{u.Username, u.UID, strings.Join(groups, "\x00"), strings.Join(extra, "\x00")}, "\x01")))
	return hex.EncodeToString(sum[:])
}

// start opens a session after the apiserver has said who the token belongs to: into the
// identity's UI when it has one, else a new one while fewer than Limits.Viewers are open.
func (v *Viewers) start(key, token string) (*user, error) {
	cfg := rest.CopyConfig(v.base)
	cfg.BearerToken = token
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(v.ctx, 10*time.Second)
	defer cancel()
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("the apiserver does not take this token: %v", err)
	}
	id := identity(review.Status.UserInfo)
	v.mu.Lock()
	defer v.mu.Unlock()
	u := v.users[id]
	if u == nil {
		if len(v.users) >= v.limits.Viewers {
			return nil, errFull
		}
		if u, err = v.newUser(id, token); err != nil {
			return nil, err
		}
		v.users[id] = u
	}
	u.token.set(token)
	if u.sessions >= v.limits.SessionsPerViewer {
		v.endLocked(v.leastRecent(u))
	}
	v.sessions[key] = &session{user: u, last: time.Now()}
	u.sessions++
	return u, nil
}

// newUser starts the UI of identity id, acting with the newest token of its sessions (token, to begin
// with).
func (v *Viewers) newUser(id, token string) (*user, error) {
	holder := &tokenHolder{token: token}
	cfg := rest.CopyConfig(v.base)
	cfg.WrapTransport = holder.RoundTripper
	ctx, cancel := context.WithCancel(v.ctx)
	srv, err := New(ctx, cfg)
	if err != nil {
		cancel()
		return nil, err
	}
	srv.signOut = true
	srv.streams = append(srv.streams, v.streams)
	return &user{id: id, srv: srv, token: holder, cancel: cancel}, nil
}

// leastRecent is u's session used longest ago.
func (v *Viewers) leastRecent(u *user) string {
	var key string
	var last time.Time
	for k, s := range v.sessions {
		if s.user == u && (key == "" || s.last.Before(last)) {
			key, last = k, s.last
		}
	}
	return key
}

// signIn serves the sign-in form and takes a token from it.
func (v *Viewers) signIn(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		v.loginPage(w, r, http.StatusOK, "")
		return
	}
	c, err := r.Cookie(loginCookie)
	if err != nil || r.Header.Get("Sec-Fetch-Site") == "cross-site" || !sameSecret(c.Value, r.PostFormValue("csrf")) {
		v.loginPage(w, r, http.StatusForbidden, "sign in from this UI's own form")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	id, err := randomHex()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if _, err := v.start("s:"+id, token); err != nil {
		code := http.StatusUnauthorized
		if errors.Is(err, errFull) {
			code = http.StatusServiceUnavailable
		}
		v.loginPage(w, r, code, err.Error())
		return
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secure(r)})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// loginPage is the sign-in form with its anti-forgery value (in a cookie and the form): the
// browser's, or a new one when it has none. It is kept, not made anew for every page refused:
// another request of the browser's (an icon, a second tab) must not void the form it shows.
func (v *Viewers) loginPage(w http.ResponseWriter, r *http.Request, code int, msg string) {
	var csrf string
	if c, err := r.Cookie(loginCookie); err == nil && len(c.Value) == 64 {
		csrf = c.Value
	} else if csrf, err = randomHex(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: csrf, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_ = v.login.Execute(w, map[string]string{"Error": msg, "CSRF": csrf})
}

// signOut ends the request's session (and its viewer's watches with their last session).
func (v *Viewers) signOut(w http.ResponseWriter, r *http.Request) {
	if key, _, err := v.sessionKey(r); err == nil {
		v.mu.Lock()
		v.endLocked(key)
		v.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure(r)})
	w.WriteHeader(http.StatusNoContent)
}

// secure is a request that came over TLS (here or at a proxy in front).
func secure(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// RunViewers serves many viewers on addr until ctx ends.
func RunViewers(ctx context.Context, addr string, base *rest.Config, mode string, limits Limits) error {
	v, err := NewViewers(ctx, base, mode, limits)
	if err != nil {
		return err
	}
	srv := &http.Server{Addr: addr, Handler: v, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shut)
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		return err
	}
	return nil
}
