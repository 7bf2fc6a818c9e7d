package ui_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/ui"
)

// watches is how many watches of the kind (plural resource of fleet.cattle.io) the apiserver
// holds open now, as its own metrics say.
func watches(ctx context.Context, resource string) int {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	n := 0
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "apiserver_longrunning_requests{") && strings.Contains(l, `group="fleet.cattle.io"`) &&
			strings.Contains(l, `resource="`+resource+`"`) && strings.Contains(l, `verb="WATCH"`) {
			f := strings.Fields(l)
			v, err := strconv.ParseFloat(f[len(f)-1], 64)
			Expect(err).NotTo(HaveOccurred())
			n += int(v)
		}
	}
	return n
}

// viewerToken is a new token of the ServiceAccount default/name, which may read Fleet's kinds.
func viewerToken(ctx context.Context, name string) string {
	_, err := kube.CoreV1().ServiceAccounts("default").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		_, err = kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ui-" + name},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "fleet-ui-limits-reader"},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "default"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// browserless is a client with its own cookies that does not follow redirects.
func browserless() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// signIn posts token from the sign-in form c was served (as a browser does) and returns the
// answer's status and body.
func signIn(c *http.Client, base, token string) (int, string) {
	resp, err := c.Get(base + "/login")
	Expect(err).NotTo(HaveOccurred())
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindStringSubmatch(string(page))
	Expect(m).To(HaveLen(2), "the sign-in form carries its anti-forgery value")
	// A browser asks for more than the form (its icon), each answered with the sign-in page:
	// the form it shows stays valid.
	Expect(get(c, base+"/favicon.ico")).To(Equal(http.StatusUnauthorized))
	return post(c, base+"/login", url.Values{"csrf": {m[1]}, "token": {token}})
}

func post(c *http.Client, to string, form url.Values) (int, string) {
	resp, err := c.PostForm(to, form)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func get(c *http.Client, to string) int {
	resp, err := c.Get(to)
	Expect(err).NotTo(HaveOccurred())
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func signOut(c *http.Client, base string) {
	req, _ := http.NewRequest(http.MethodPost, base+"/logout", nil)
	req.Header.Set("X-Fleet-UI", "1")
	resp, err := c.Do(req)
	Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	Expect(resp.StatusCode).To(Equal(http.StatusNoContent))
}

var _ = Describe("fleet ui --in-cluster limits", Ordered, func() {
	It("keeps one set of watches per identity, bounds viewers, sessions and live pages, takes sign-ins only from its own form, and signs out", func(ctx context.Context) {
		_, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "fleet-ui-limits-reader"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"fleet.cattle.io"}, Verbs: []string{"get", "list", "watch"},
				Resources: []string{"gitrepos", "helmops", "bundles", "bundledeployments", "clusters", "clustergroups", "rollouts", "alerts"}}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		runCtx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		v, err := ui.NewViewers(runCtx, cluster.RESTConfig(), ui.AuthToken, ui.Limits{Viewers: 1, SessionsPerViewer: 2, Streams: 1})
		Expect(err).NotTo(HaveOccurred())
		srv := httptest.NewServer(v)
		DeferCleanup(srv.Close)
		base := srv.URL
		// The suite's manager watches Rollouts too: counted once its watch is open (when this
		// container runs first, it may not be yet), so that what follows counts the UI's alone.
		Eventually(func() int { return watches(ctx, "rollouts") }, time.Minute).Should(BeNumerically(">", 0))
		before := watches(ctx, "rollouts")

		By("a sign-in posted without the form's value (another site's form) is refused")
		code, body := post(browserless(), base+"/login", url.Values{"token": {viewerToken(ctx, "alice")}})
		Expect(code).To(Equal(http.StatusForbidden))
		Expect(body).To(ContainSubstring("sign in from this UI&#39;s own form"))
		Expect(v.Open()).To(Equal(ui.Open{}))

		By("two sessions of one identity share one set of watches")
		first, second := browserless(), browserless()
		code, _ = signIn(first, base, viewerToken(ctx, "alice"))
		Expect(code).To(Equal(http.StatusSeeOther))
		Eventually(func() int { return watches(ctx, "rollouts") }, time.Minute).Should(Equal(before + 1))
		code, _ = signIn(second, base, viewerToken(ctx, "alice"))
		Expect(code).To(Equal(http.StatusSeeOther))
		Expect(get(first, base+"/")).To(Equal(http.StatusOK))
		Expect(get(second, base+"/")).To(Equal(http.StatusOK))
		Expect(v.Open()).To(Equal(ui.Open{Viewers: 1, Sessions: 2}))
		Consistently(func() int { return watches(ctx, "rollouts") }, 3*time.Second).Should(Equal(before + 1))

		By("another identity past the cap is refused")
		code, body = signIn(browserless(), base, viewerToken(ctx, "bob"))
		Expect(code).To(Equal(http.StatusServiceUnavailable))
		Expect(body).To(ContainSubstring("as many viewers as it may"))

		By("a session past the identity's cap ends its least recently used")
		Expect(get(second, base+"/")).To(Equal(http.StatusOK))
		third := browserless()
		code, _ = signIn(third, base, viewerToken(ctx, "alice"))
		Expect(code).To(Equal(http.StatusSeeOther))
		Expect(get(first, base+"/")).To(Equal(http.StatusUnauthorized))
		Expect(v.Open()).To(Equal(ui.Open{Viewers: 1, Sessions: 2}))

		By("a live page past the cap is refused")
		streamCtx, closeStream := context.WithCancel(ctx)
		req, _ := http.NewRequestWithContext(streamCtx, http.MethodGet, base+"/events?path=/", nil)
		stream, err := second.Do(req)
		Expect(err).NotTo(HaveOccurred())
		Expect(stream.StatusCode).To(Equal(http.StatusOK))
		Expect(get(third, base+"/events?path=/")).To(Equal(http.StatusServiceUnavailable))
		closeStream()
		stream.Body.Close()
		Eventually(v.Open).Should(HaveField("Streams", 0))

		By("signing out ends the session; the identity's last one ends its watches")
		signOut(second, base)
		Expect(get(second, base+"/")).To(Equal(http.StatusUnauthorized))
		Expect(get(third, base+"/")).To(Equal(http.StatusOK))
		signOut(third, base)
		Expect(v.Open()).To(Equal(ui.Open{}))
		Eventually(func() int { return watches(ctx, "rollouts") }, time.Minute).Should(Equal(before))
		code, _ = signIn(browserless(), base, viewerToken(ctx, "bob"))
		Expect(code).To(Equal(http.StatusSeeOther), "room for another viewer once the first signed out")
	})
})
