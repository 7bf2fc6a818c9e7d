package ui

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"html/template"
	"net/http"
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

// idleTimeout ends a viewer's session (and its watches) after this long without a request.
const idleTimeout = 8 * time.Hour

// Viewers serves the UI to many viewers, each with their own credential and their own watches.
type Viewers struct {
	base *rest.Config
	mode string
	ctx  context.Context
	mu   sync.Mutex
	// byKey holds each viewer's UI by session (token mode) or by the token's hash (header mode).
	byKey map[string]*viewer
	login *template.Template
}

type viewer struct {
	srv    *Server
	name   string
	last   time.Time
	cancel context.CancelFunc
}

// NewViewers serves viewers of the apiserver of base, whose own credential is dropped: the UI
// can do nothing with it.
func NewViewers(ctx context.Context, base *rest.Config, mode string) (*Viewers, error) {
	if mode != AuthToken && mode != AuthHeader {
		return nil, fmt.Errorf("auth %q: token or header", mode)
	}
	anon := rest.AnonymousClientConfig(base)
	login, err := template.ParseFS(assets, "templates/login.html")
	if err != nil {
		return nil, err
	}
	v := &Viewers{base: anon, mode: mode, ctx: ctx, byKey: map[string]*viewer{}, login: login}
	go v.expire()
	return v, nil
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
			for k, vw := range v.byKey {
				if now.Sub(vw.last) > idleTimeout {
					vw.cancel()
					delete(v.byKey, k)
				}
			}
			v.mu.Unlock()
		}
	}
}

// ServeHTTP signs viewers in and hands each request to the viewer's own UI.
func (v *Viewers) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && (r.Header.Get("X-Fleet-UI") != "1" || r.Header.Get("Sec-Fetch-Site") == "cross-site") &&
		r.URL.Path != "/login" {
		http.Error(w, "actions are taken from the UI's own pages only", http.StatusForbidden)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/static/") {
		staticFiles.ServeHTTP(w, r)
		return
	}
	if v.mode == AuthToken && r.URL.Path == "/login" {
		v.signIn(w, r)
		return
	}
	vw, err := v.viewerOf(r)
	if err != nil {
		if v.mode == AuthToken {
			w.WriteHeader(http.StatusUnauthorized)
			_ = v.login.Execute(w, map[string]string{"Error": err.Error()})
			return
		}
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	vw.srv.Handler().ServeHTTP(w, r)
}

// viewerOf is the UI of the request's viewer.
func (v *Viewers) viewerOf(r *http.Request) (*viewer, error) {
	var key, token string
	switch v.mode {
	case AuthHeader:
		auth := r.Header.Get("Authorization")
		if !strings.HasPrefix(auth, "Bearer ") {
			return nil, fmt.Errorf("no bearer token from the authenticating proxy")
		}
		token = strings.TrimPrefix(auth, "Bearer ")
		sum := sha256.Sum256([]byte(token))
		key = "h:" + hex.EncodeToString(sum[:])
	default:
		c, err := r.Cookie("fleet-ui-session")
		if err != nil {
			return nil, fmt.Errorf("sign in with your Kubernetes token")
		}
		key = "s:" + c.Value
	}
	v.mu.Lock()
	vw := v.byKey[key]
	if vw != nil {
		vw.last = time.Now()
	}
	v.mu.Unlock()
	if vw != nil {
		return vw, nil
	}
	if token == "" {
		return nil, fmt.Errorf("your session has ended: sign in again")
	}
	return v.start(key, token)
}

// start makes a viewer's UI after the apiserver has said who the token belongs to.
func (v *Viewers) start(key, token string) (*viewer, error) {
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
	vctx, vcancel := context.WithCancel(v.ctx)
	srv, err := New(vctx, cfg)
	if err != nil {
		vcancel()
		return nil, err
	}
	vw := &viewer{srv: srv, name: review.Status.UserInfo.Username, last: time.Now(), cancel: vcancel}
	v.mu.Lock()
	v.byKey[key] = vw
	v.mu.Unlock()
	return vw, nil
}

// signIn takes a token from the login form and sets the session cookie.
func (v *Viewers) signIn(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		_ = v.login.Execute(w, map[string]string{})
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	id := make([]byte, 32)
	_, _ = rand.Read(id)
	session := hex.EncodeToString(id)
	vw, err := v.start("s:"+session, token)
	if err != nil {
		w.WriteHeader(http.StatusUnauthorized)
		_ = v.login.Execute(w, map[string]string{"Error": err.Error()})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: "fleet-ui-session", Value: session, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"})
	_ = vw
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// RunViewers serves many viewers on addr until ctx ends.
func RunViewers(ctx context.Context, addr string, base *rest.Config, mode string) error {
	v, err := NewViewers(ctx, base, mode)
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
