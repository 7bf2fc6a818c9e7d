package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// endpoints stand in for a webhook receiver and GitHub's commit status API, as the manager
// reaches them: messages (their reason and summary) and commit statuses ("sha state").
type endpoints struct {
	mu       sync.Mutex
	messages []string
	statuses []string
	url      string
}

// newEndpoints serves POST /hook (JSON messages) and GitHub's POST
// /repos/team/rollout-demo/statuses/{sha} with the token "gh-token".
func newEndpoints() *endpoints {
	e := &endpoints{}
	status := regexp.MustCompile(`^/api/repos/team/` + rolloutRepo + `/statuses/([0-9a-f]{40})$`)
	l, err := net.Listen("tcp", "0.0.0.0:0")
	Expect(err).NotTo(HaveOccurred())
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		defer e.mu.Unlock()
		var msg struct{ Reason, Summary, State string }
		if r.Method != http.MethodPost || json.Unmarshal(body, &msg) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch m := status.FindStringSubmatch(r.URL.Path); {
		case r.URL.Path == "/hook":
			e.messages = append(e.messages, msg.Reason+": "+msg.Summary)
		case m != nil && r.Header.Get("Authorization") == "Bearer gh-token":
			e.statuses = append(e.statuses, m[1]+" "+msg.State)
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte("{}"))
			return
		default:
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	})}
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	e.url = fmt.Sprintf("http://%s:%d", netns.HostIP, l.Addr().(*net.TCPAddr).Port)
	return e
}

// alertOn makes, in fleet-default, an Alert on the GitRepo through a webhook provider, and one
// through a GitHub provider, both at these endpoints.
func (e *endpoints) alertOn(gitrepo string) {
	_, err := managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "github-checks", Namespace: fleet.DefaultNamespace,
			Annotations: map[string]string{"fleet.cattle.io/allowed-uses": fleet.UseNotifications}},
		StringData: map[string]string{"token": "gh-token"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	for name, spec := range map[string]fleet.AlertProviderSpec{
		"hook":   {Type: fleet.ProviderWebhook, Address: e.url + "/hook"},
		"github": {Type: fleet.ProviderGitHub, Address: e.url + "/api/", SecretName: "github-checks"},
	} {
		_, err := api.AlertProvider().Create(&fleet.AlertProvider{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace}, Spec: spec})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Alert().Create(&fleet.Alert{ObjectMeta: metav1.ObjectMeta{Name: gitrepo + "-" + name, Namespace: fleet.DefaultNamespace},
			Spec: fleet.AlertSpec{ProviderRef: name, Sources: []fleet.AlertSource{{Kind: "GitRepo", Name: gitrepo}}}})
		Expect(err).NotTo(HaveOccurred())
	}
	DeferCleanup(func() {
		for _, name := range []string{"hook", "github"} {
			_ = api.Alert().Delete(fleet.DefaultNamespace, gitrepo+"-"+name, &metav1.DeleteOptions{})
			_ = api.AlertProvider().Delete(fleet.DefaultNamespace, name, &metav1.DeleteOptions{})
		}
		_ = managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Delete(context.Background(), "github-checks", metav1.DeleteOptions{})
	})
}

// since are the messages after the first n.
func (e *endpoints) since(n int) func() []string {
	return func() []string {
		e.mu.Lock()
		defer e.mu.Unlock()
		return append([]string{}, e.messages[min(n, len(e.messages)):]...)
	}
}

// about are the messages after the first n whose summary starts with subject (a Bundle's
// rollout's; not the GitRepo's own, which a failing poll may add under load).
func (e *endpoints) about(subject string, n int) func() []string {
	return func() []string {
		var out []string
		for _, m := range e.since(n)() {
			if _, summary, _ := strings.Cut(m, ": "); strings.HasPrefix(summary, subject) {
				out = append(out, m)
			}
		}
		return out
	}
}

func (e *endpoints) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.messages)
}

// statusesOf are the commit statuses set on commit, in order.
func (e *endpoints) statusesOf(commit string) func() []string {
	return func() []string {
		e.mu.Lock()
		defer e.mu.Unlock()
		var out []string
		for _, s := range e.statuses {
			if sha, state, _ := strings.Cut(s, " "); sha == commit {
				out = append(out, state)
			}
		}
		return out
	}
}
