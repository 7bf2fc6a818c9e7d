package controller_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	clinotify "github.com/fleetgo/fleet/internal/cli/notify"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	"github.com/fleetgo/fleet/internal/controller/notify"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// receiver is a local endpoint that takes JSON messages as a chat service or webhook receiver
// does: with hmacKey, only a body signed with it (as X-Fleet-Signature says) is taken.
type receiver struct {
	*httptest.Server
	hmacKey []byte
	mu      sync.Mutex
	got     []map[string]any
	keys    []string
	refused int
}

func newReceiver(hmacKey []byte) *receiver {
	r := &receiver{hmacKey: hmacKey}
	r.Server = httptest.NewServer(http.HandlerFunc(r.take))
	DeferCleanup(r.Close)
	return r
}

// take takes a message as the endpoint does.
func (r *receiver) take(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hmacKey != nil {
		m := hmac.New(sha256.New, r.hmacKey)
		m.Write(body)
		if !hmac.Equal([]byte(req.Header.Get(notify.SignatureHeader)), []byte("sha256="+hex.EncodeToString(m.Sum(nil)))) {
			r.refused++
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
	}
	msg := map[string]any{}
	if req.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &msg) != nil {
		r.refused++
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.got = append(r.got, msg)
	r.keys = append(r.keys, req.Header.Get(notify.KeyHeader))
	w.WriteHeader(http.StatusOK)
}

// field lists each message's value of key.
func (r *receiver) field(key string) func() []string {
	return func() []string {
		r.mu.Lock()
		defer r.mu.Unlock()
		out := []string{}
		for _, m := range r.got {
			s, _ := m[key].(string)
			out = append(out, s)
		}
		return out
	}
}

var _ = Describe("an Alert", func() {
	It("sends one message per rollout transition, not one per cluster: to a webhook, signed, to Slack, failures only, and to Teams, rollbacks only", func(ctx context.Context) {
		ns := atOnce(ctx, "a", "b", "c")
		Eventually(func() string { return rolloutOf(ns)().Phase }).Should(Equal(fleet.RolloutProgressing))
		hook, slack, teams := newReceiver([]byte("hook-key")), newReceiver(nil), newReceiver(nil)
		_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns,
			Annotations: map[string]string{"fleet.cattle.io/allowed-uses": fleet.UseNotifications}},
			Data: map[string][]byte{"address": []byte(hook.URL), "hmacKey": []byte("hook-key")}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		for name, spec := range map[string]fleet.AlertProviderSpec{
			"hook":  {Type: fleet.ProviderWebhook, SecretName: "hook", UIURL: "https://fleet.example/"},
			"slack": {Type: fleet.ProviderSlack, Address: slack.URL, Channel: "#deploys"},
			"teams": {Type: fleet.ProviderMSTeams, Address: teams.URL, UIURL: "https://fleet.example/"},
		} {
			_, err := api.AlertProvider().Create(&fleet.AlertProvider{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec})
			Expect(err).NotTo(HaveOccurred())
		}
		sources := []fleet.AlertSource{{Kind: "Bundle", Name: "app"}}
		for name, spec := range map[string]fleet.AlertSpec{
			"all":       {ProviderRef: "hook", Sources: sources},
			"failures":  {ProviderRef: "slack", Sources: sources, EventSeverity: fleet.SeverityError},
			"rollbacks": {ProviderRef: "teams", Sources: sources, Events: []string{"RolledBack"}},
		} {
			_, err := api.Alert().Create(&fleet.Alert{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec})
			Expect(err).NotTo(HaveOccurred())
		}
		// What the rollout showed when the Alerts came is not sent: they report from then on.
		for _, name := range []string{"all", "failures", "rollbacks"} {
			Eventually(func() []fleet.AlertSent {
				a, err := api.Alert().Get(ns, name, metav1.GetOptions{})
				Expect(err).NotTo(HaveOccurred())
				return a.Status.Sent
			}).ShouldNot(BeNil())
		}

		By("three clusters pass: one message, Complete")
		for _, bd := range deployments(ns, "app") {
			agentGates(bd, true)
		}
		Eventually(hook.field("reason"), "20s").Should(Equal([]string{"Complete"}))

		By("a new revision starts, and one cluster's gate fails: Started, then RolledBack, once each")
		updateBundle(ns, "app", func(b *fleet.Bundle) { b.Spec.DefaultNamespace = "v2" })
		Eventually(onValue(ns, "v2"), "20s").Should(Equal([]string{"a", "b", "c"}))
		Eventually(hook.field("reason"), "20s").Should(Equal([]string{"Complete", "Started"}))
		agentGates(deployments(ns, "app")["b"], false)
		Eventually(hook.field("reason"), "20s").Should(Equal([]string{"Complete", "Started", "Halted", "RolledBack"}))
		Eventually(slack.field("text"), "20s").Should(HaveExactElements(
			And(HavePrefix("[Halted] app revision"), ContainSubstring("halted at stage all"), ContainSubstring("1 failed: web: GET http://web/: status N (b)")),
			HavePrefix("[RolledBack] app revision")))
		Expect(slack.got[0]["channel"]).To(Equal("#deploys"))
		// Teams takes a MessageCard: its summary, and the text in paragraphs with the link.
		Eventually(teams.field("@type"), "20s").Should(Equal([]string{"MessageCard"}))
		Expect(teams.field("summary")()[0]).To(HavePrefix("app revision"))
		Expect(teams.field("text")()[0]).To(And(HavePrefix("[RolledBack] app revision"), HaveSuffix("\n\nhttps://fleet.example/bundles/"+ns+"/app")))
		Consistently(hook.field("reason"), "3s").Should(HaveLen(4))

		hook.mu.Lock()
		defer hook.mu.Unlock()
		Expect(hook.refused).To(BeZero())
		Expect(hook.got[3]["link"]).To(Equal("https://fleet.example/bundles/" + ns + "/app"))
		Expect(hook.keys).To(HaveLen(4))
		Expect(hook.keys[0]).NotTo(Equal(hook.keys[1]))
		a, err := api.Alert().Get(ns, "all", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(a.Status.LastMessage).To(ContainSubstring("rolled back"))
		Expect(fleet.FindCondition(a.Status.Conditions, fleet.ConditionDelivered).Status).To(Equal(corev1.ConditionTrue))
	})
})

var _ = Describe("a message whose manager restarts before delivering it", func() {
	It("is delivered exactly once, by the next manager", func(ctx context.Context) {
		// A control plane of its own: the suite's manager must not deliver it meanwhile.
		own, ownAPI, err := testenv.StartWithCRDs(ctx, "notify-restart")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(own.Stop)
		ownKube, err := own.Clientset()
		Expect(err).NotTo(HaveOccurred())
		up := &atomic.Bool{}
		hook := newReceiver(nil)
		hook.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !up.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			hook.take(w, r)
		})
		stop := testenv.RunController(own.RESTConfig(), config.Config{}, controller.Options{HealthAddr: freeAddr(), MetricsAddr: freeAddr()})
		stopped := false
		DeferCleanup(func() {
			if !stopped {
				_ = stop()
			}
		})
		const ns = "restart"
		_, err = ownKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = ownAPI.AlertProvider().Create(&fleet.AlertProvider{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns},
			Spec: fleet.AlertProviderSpec{Type: fleet.ProviderWebhook, Address: hook.URL}})
		Expect(err).NotTo(HaveOccurred())
		_, err = ownAPI.Alert().Create(&fleet.Alert{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
			Spec: fleet.AlertSpec{ProviderRef: "hook", Sources: []fleet.AlertSource{{Kind: "Bundle", Name: "app"}}}})
		Expect(err).NotTo(HaveOccurred())
		alert := func() *fleet.Alert {
			a, err := ownAPI.Alert().Get(ns, "all", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return a
		}
		Eventually(func() bool { return fleet.FindCondition(alert().Status.Conditions, fleet.ConditionDelivered) != nil }).Should(BeTrue())

		By("a rollout completes while the endpoint refuses: the delivery fails and waits")
		_, err = ownAPI.RolloutPolicy().Create(&fleet.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
			Spec: fleet.RolloutPolicySpec{Stages: []fleet.RolloutStage{{Name: "all"}}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = ownAPI.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns,
			Annotations: map[string]string{fleet.RolloutPolicyAnnotation: "p"}},
			Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "kind: ConfigMap\nmetadata:\n  name: app\n"}}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() string { return alert().Status.LastError }, "30s").Should(ContainSubstring("status 503"))
		Expect(hook.field("reason")()).To(BeEmpty())

		By("the manager stops before the endpoint comes back; the next one delivers the message once")
		stopped = true
		Expect(stop()).To(Succeed())
		up.Store(true)
		stop = testenv.RunController(own.RESTConfig(), config.Config{}, controller.Options{HealthAddr: freeAddr(), MetricsAddr: freeAddr()})
		stopped = false
		Eventually(hook.field("reason"), "60s").Should(Equal([]string{"Complete"}))
		Eventually(func() string { return alert().Status.LastMessage }).Should(ContainSubstring("complete"))
		Expect(alert().Status.LastError).To(BeEmpty())

		By("a third manager sends nothing again")
		Expect(stop()).To(Succeed())
		stop = testenv.RunController(own.RESTConfig(), config.Config{}, controller.Options{HealthAddr: freeAddr(), MetricsAddr: freeAddr()})
		Consistently(hook.field("reason"), "8s").Should(HaveLen(1))
	})
})

var _ = Describe("fleet notify test", func() {
	It("has the manager send a test message through the Alert's provider, and says why one cannot be delivered", func(ctx context.Context) {
		ns := newNamespace(ctx)
		hook := newReceiver(nil)
		for name, addr := range map[string]string{"hook": hook.URL, "gone": "http://127.0.0.1:1/"} {
			_, err := api.AlertProvider().Create(&fleet.AlertProvider{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: fleet.AlertProviderSpec{Type: fleet.ProviderWebhook, Address: addr}})
			Expect(err).NotTo(HaveOccurred())
			_, err = api.Alert().Create(&fleet.Alert{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: fleet.AlertSpec{ProviderRef: name, Sources: []fleet.AlertSource{{Kind: "GitRepo"}}}})
			Expect(err).NotTo(HaveOccurred())
		}
		var out bytes.Buffer
		Expect(clinotify.Test(ctx, api.Alert(), ns, "hook", time.Minute, 200*time.Millisecond, &out)).To(Succeed())
		Expect(out.String()).To(ContainSubstring("test message delivered through hook"))
		Expect(hook.field("reason")()).To(Equal([]string{"Test"}))

		err := clinotify.Test(ctx, api.Alert(), ns, "gone", time.Minute, 200*time.Millisecond, &out)
		Expect(err).To(MatchError(And(ContainSubstring("was not delivered"), ContainSubstring("alertprovider gone: POST http://127.0.0.1:1/..."))))
	})
})

var _ = Describe("an Alert on a Bundle's and its clusters' health", func() {
	It("sends NotReady past its deadline, drift and its correction, clusters offline and back, and folds repeats into one digest", func(ctx context.Context) {
		ns := newNamespace(ctx)
		newCluster(ns, "x", nil)
		newCluster(ns, "y", nil)
		keepCheckingIn(ns, "x")
		stopY := keepCheckingIn(ns, "y")
		hook := newReceiver(nil)
		_, err := api.AlertProvider().Create(&fleet.AlertProvider{ObjectMeta: metav1.ObjectMeta{Name: "hook", Namespace: ns},
			Spec: fleet.AlertProviderSpec{Type: fleet.ProviderWebhook, Address: hook.URL}})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Alert().Create(&fleet.Alert{ObjectMeta: metav1.ObjectMeta{Name: "health", Namespace: ns},
			Spec: fleet.AlertSpec{ProviderRef: "hook", Sources: []fleet.AlertSource{{Kind: "Bundle", Name: "web"}, {Kind: "Cluster"}},
				NotReadyAfter: &metav1.Duration{Duration: 3 * time.Second}, DigestWindow: &metav1.Duration{Duration: 40 * time.Second}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() bool {
			a, err := api.Alert().Get(ns, "health", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return fleet.FindCondition(a.Status.Conditions, fleet.ConditionDelivered) != nil
		}).Should(BeTrue())
		newBundle(ns, "web", fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterName: "x"}, {ClusterName: "y"}}})
		var bds map[string]*fleet.BundleDeployment
		Eventually(func() int { bds = deployments(ns, "web"); return len(bds) }).Should(Equal(2))
		report := func(c string, ready, modified bool) {
			agentReports(bds[c], func(s *fleet.BundleDeploymentStatus) {
				s.AppliedDeploymentID, s.Ready, s.NonModified = bds[c].Spec.DeploymentID, ready, !modified
				s.NonReadyStatus, s.ModifiedStatus = nil, nil
				if !ready {
					s.NonReadyStatus = []fleet.NonReadyStatus{{Kind: "Deployment", Namespace: "default", Name: "web",
						Summary: fleet.Summary{State: "in-progress", Message: []string{"Available: 0/3 replicas"}}}}
				}
				if modified {
					s.ModifiedStatus = []fleet.ModifiedStatus{{Kind: "ConfigMap", Namespace: "default", Name: "web", Exist: true, Patch: `{"data":{"a":"1"}}`}}
				}
				fleet.SetCondition(&s.Conditions, fleet.ConditionDeployed, corev1.ConditionTrue, "", "", time.Now())
			})
		}

		By("y stays not ready past the deadline: one NotReady naming it; then ready: Ready")
		report("x", true, false)
		report("y", false, false)
		Eventually(hook.field("reason"), "30s").Should(Equal([]string{"NotReady"}))
		Expect(hook.field("summary")()[0]).To(ContainSubstring("Bundle web not ready for over 3s"))
		Expect(hook.got[0]["groups"]).To(ContainElement(HaveKeyWithValue("clusters", ContainElement(ContainSubstring("y")))))
		report("y", true, false)
		Eventually(hook.field("reason"), "30s").Should(Equal([]string{"NotReady", "Ready"}))

		By("x drifts and is corrected: a message each; again within the window: held, then one digest")
		report("x", true, true)
		Eventually(hook.field("reason"), "30s").Should(Equal([]string{"NotReady", "Ready", "Drifted"}))
		report("x", true, false)
		Eventually(hook.field("reason"), "30s").Should(Equal([]string{"NotReady", "Ready", "Drifted", "DriftCorrected"}))
		report("x", true, true)
		Consistently(hook.field("reason"), "3s").Should(HaveLen(4))
		report("x", true, false)
		Eventually(hook.field("reason"), "90s").Should(Equal([]string{"NotReady", "Ready", "Drifted", "DriftCorrected", "DriftCorrected"}))
		Expect(hook.field("summary")()[4]).To(HavePrefix("2 changes held back (DriftCorrected 1, Drifted 1); now: Bundle web: the drift is gone"))
		Expect(hook.field("key")()[4]).To(ContainSubstring("#digest-"))

		By("y's agent stops checking in: Offline naming it; back: Online")
		stopY()
		Eventually(hook.field("reason"), "60s").Should(HaveLen(6))
		Expect(hook.field("reason")()[5]).To(Equal("Offline"))
		Expect(hook.field("summary")()[5]).To(Equal("1 of 2 clusters offline: y"))
		keepCheckingIn(ns, "y")
		Eventually(hook.field("reason"), "60s").Should(HaveLen(7))
		Expect(hook.field("reason")()[6]).To(Equal("Online"))
		Consistently(hook.field("reason"), "3s").Should(HaveLen(7))
	})
})
