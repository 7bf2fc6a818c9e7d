package gitrepo_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// forge stands in for a forge's commit status API: it takes a status only on the path and with
// the token the real one checks, and answers 201 as it does.
type forge struct {
	*httptest.Server
	mu       sync.Mutex
	statuses []string // "sha state context"
	refused  int
}

// newForge serves GitHub's POST /repos/{owner}/{repo}/statuses/{sha} (Authorization: Bearer
// token, a JSON body) or GitLab's POST /projects/{owner%2Frepo}/statuses/{sha}?state=&name=
// (PRIVATE-TOKEN: token).
func newForge(kind, token string) *forge {
	f := &forge{}
	gh := regexp.MustCompile(`^/repos/team/checks/statuses/([0-9a-f]{40})$`)
	gl := regexp.MustCompile(`^/projects/team%2Fchecks/statuses/([0-9a-f]{40})$`)
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var sha, state, ctx string
		switch kind {
		case "github":
			m := gh.FindStringSubmatch(r.URL.Path)
			var body struct{ State, Context, Description string }
			data, _ := io.ReadAll(r.Body)
			if m == nil || r.Method != http.MethodPost || r.Header.Get("Authorization") != "Bearer "+token || json.Unmarshal(data, &body) != nil || body.Description == "" {
				f.refused++
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			sha, state, ctx = m[1], body.State, body.Context
		default:
			m := gl.FindStringSubmatch(r.URL.EscapedPath())
			if m == nil || r.Method != http.MethodPost || r.Header.Get("PRIVATE-TOKEN") != token || r.URL.Query().Get("description") == "" {
				f.refused++
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			sha, state, ctx = m[1], r.URL.Query().Get("state"), r.URL.Query().Get("name")
		}
		f.statuses = append(f.statuses, sha+" "+state+" "+ctx)
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"id": 1}`))
	}))
	DeferCleanup(f.Close)
	return f
}

func (f *forge) seen() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string{}, f.statuses...)
}

var _ = Describe("a commit's check on the forge", func() {
	It("is pending while the commit rolls out and success once every cluster is ready, on GitHub and GitLab, with their tokens", func(ctx context.Context) {
		ns := fleet.DefaultNamespace
		gh, gl := newForge("github", "gh-token"), newForge("gitlab", "gl-token")
		for name, f := range map[string]*forge{"github": gh, "gitlab": gl} {
			_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge-" + name, Namespace: ns,
				Annotations: map[string]string{"fleet.cattle.io/allowed-uses": fleet.UseNotifications}},
				StringData: map[string]string{"token": map[string]string{"github": "gh-token", "gitlab": "gl-token"}[name]}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = api.AlertProvider().Create(&fleet.AlertProvider{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: fleet.AlertProviderSpec{Type: name, Address: f.URL, SecretName: "forge-" + name}})
			Expect(err).NotTo(HaveOccurred())
			_, err = api.Alert().Create(&fleet.Alert{ObjectMeta: metav1.ObjectMeta{Name: "checks-" + name, Namespace: ns},
				Spec: fleet.AlertSpec{ProviderRef: name, Sources: []fleet.AlertSource{{Kind: "GitRepo", Name: "checks"}}}})
			Expect(err).NotTo(HaveOccurred())
			Eventually(func() []fleet.AlertSent {
				a, err := api.Alert().Get(ns, "checks-"+name, metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				if fleet.FindCondition(a.Status.Conditions, fleet.ConditionDelivered) == nil {
					return nil
				}
				return []fleet.AlertSent{}
			}).ShouldNot(BeNil())
		}
		_, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "checked", Namespace: ns, Labels: map[string]string{"checks": "yes"}}})
		Expect(err).NotTo(HaveOccurred())
		commit := publish("team/checks", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		newGitRepo("checks", "team/checks", func(s *fleet.GitRepoSpec) {
			s.Targets = []fleet.GitTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"checks": "yes"}}}}
		})
		Eventually(gh.seen, "90s").Should(ContainElement(commit + " pending fleet/checks"))
		Eventually(gl.seen, "90s").Should(ContainElement(commit + " running fleet/checks"))

		By("the one cluster's agent reports the deployment ready")
		Eventually(func() error {
			list, err := api.BundleDeployment().List("", metav1.ListOptions{LabelSelector: labels.Set{fleet.RepoLabel: "checks"}.String()})
			if err != nil || len(list.Items) != 1 {
				return err
			}
			cur := &list.Items[0]
			cur.Status.AppliedDeploymentID, cur.Status.Ready, cur.Status.NonModified = cur.Spec.DeploymentID, true, true
			fleet.SetCondition(&cur.Status.Conditions, fleet.ConditionDeployed, corev1.ConditionTrue, "", "", time.Now())
			fleet.SetCondition(&cur.Status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "", time.Now())
			_, err = api.BundleDeployment().UpdateStatus(cur)
			return err
		}).Should(Succeed())
		Eventually(gh.seen, "90s").Should(Equal([]string{commit + " pending fleet/checks", commit + " success fleet/checks"}))
		Eventually(gl.seen, "90s").Should(Equal([]string{commit + " running fleet/checks", commit + " success fleet/checks"}))
		Expect(gh.refused + gl.refused).To(BeZero())
	})
})
