package gates

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// gated is an applied, ready BundleDeployment asking for gates.
func gated(t *testing.T, gates ...fleet.HealthGate) (*fleet.BundleDeployment, *fleet.BundleDeploymentStatus) {
	data, err := json.Marshal(gates)
	if err != nil {
		t.Fatal(err)
	}
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{fleet.RolloutGatesAnnotation: string(data)}}}
	bd.Spec.DeploymentID = "c:1"
	bd.Spec.Options.DefaultNamespace = "demo"
	st := &fleet.BundleDeploymentStatus{AppliedDeploymentID: "c:1"}
	fleet.SetCondition(&st.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "", now)
	return bd, st
}

// checker runs a Checker's checks one at a time, on a clock of its own.
type checker struct {
	*Checker
	t     *testing.T
	at    time.Time
	ended chan string
}

func newChecker(t *testing.T, clientFor ClientFor, o Options) *checker {
	c := &checker{Checker: New(clientFor, o), t: t, at: now, ended: make(chan string, 16)}
	c.clock = func() time.Time { return c.at }
	c.Notify(func(name string) { c.ended <- name })
	return c
}

// once starts the due check of bd's gate, waits for it to end, records its result and moves
// the clock on to the next check; it returns the interval Evaluate asked for.
func (c *checker) once(bd *fleet.BundleDeployment, st *fleet.BundleDeploymentStatus) time.Duration {
	c.t.Helper()
	every := c.Evaluate(context.Background(), bd, st, now)
	select {
	case <-c.ended:
	case <-time.After(30 * time.Second):
		c.t.Fatal("no check ended")
	}
	c.Evaluate(context.Background(), bd, st, now)
	c.at = c.at.Add(every)
	return every
}

func noClient(context.Context, string) (kubernetes.Interface, error) { return fake.NewClientset(), nil }

func gate(st *fleet.BundleDeploymentStatus, name string) string {
	c := fleet.FindCondition(st.Conditions, fleet.GateCondition(name))
	if c == nil {
		return "none"
	}
	return string(c.Status) + " " + c.Message
}

func TestHTTPGateFailsAfterTheThreshold(t *testing.T) {
	var code atomic.Int32
	code.Store(200)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(int(code.Load())) }))
	defer srv.Close()
	c := newChecker(t, noClient, Options{AllowLocal: true})
	bd, st := gated(t, fleet.HealthGate{Name: "web", HTTPGet: &fleet.HTTPGate{URL: srv.URL + "/healthz"}, FailureThreshold: 2})
	if every := c.once(bd, st); every != 10*time.Second || !strings.HasPrefix(gate(st, "web"), "True ") {
		t.Fatalf("%s, every %s", gate(st, "web"), every)
	}
	code.Store(500)
	c.once(bd, st)
	if g := gate(st, "web"); !strings.HasPrefix(g, "True ") {
		t.Fatalf("one failure keeps the last result: %s", g)
	}
	c.once(bd, st)
	if g := gate(st, "web"); g != "False GET "+srv.URL+"/healthz: status 500" {
		t.Fatalf("after two: %s", g)
	}
	// Not ready: nothing is checked; a new deployment clears the results.
	Clear(st)
	fleet.SetCondition(&st.Conditions, fleet.ConditionReady, corev1.ConditionFalse, "", "", now)
	c.Evaluate(context.Background(), bd, st, now)
	if g := gate(st, "web"); !strings.HasPrefix(g, "Unknown waiting") {
		t.Fatalf("not ready: %s", g)
	}
}

func TestPrometheusGate(t *testing.T) {
	value := "0.02"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/query" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"%s"]}]}}`, value)
	}))
	defer srv.Close()
	c := newChecker(t, noClient, Options{AllowLocal: true})
	g := fleet.HealthGate{Name: "errors", FailureThreshold: 1, Prometheus: &fleet.PrometheusGate{URL: srv.URL, Query: "rate(errors[1m])", Op: "<", Threshold: "0.05"}}
	bd, st := gated(t, g)
	c.once(bd, st)
	if got := gate(st, "errors"); got != `True query "rate(errors[1m])" is < 0.05` {
		t.Fatal(got)
	}
	value = "0.5"
	c.once(bd, st)
	// The sample's value is not reported: the gate's author learns only whether it passed.
	if got := gate(st, "errors"); got != `False query "rate(errors[1m])" is not < 0.05` {
		t.Fatal(got)
	}
	// No Prometheus there: reported, naming the field, without the error's text.
	g.Prometheus.URL = "http://127.0.0.1:1"
	bd, st = gated(t, g)
	c.once(bd, st)
	if got := gate(st, "errors"); got != `False prometheus.url http://127.0.0.1:1: query "rate(errors[1m])": no answer` {
		t.Fatal(got)
	}
}

func TestJobGate(t *testing.T) {
	kube := fake.NewClientset()
	var as []string
	c := newChecker(t, func(_ context.Context, sa string) (kubernetes.Interface, error) {
		as = append(as, sa)
		return kube, nil
	}, Options{})
	bd, st := gated(t, fleet.HealthGate{Name: "smoke", Job: &fleet.JobGate{Image: "busybox", Command: []string{"true"}}})
	bd.Spec.Options.ServiceAccount = "tenant"
	c.once(bd, st)
	if len(as) != 1 || as[0] != "tenant" {
		t.Fatalf("the Job is made as the bundle's ServiceAccount: %v", as)
	}
	name := JobName("web", "smoke", "c:1")
	j, err := kube.BatchV1().Jobs("demo").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || j.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("job: %v", err)
	}
	if pod := j.Spec.Template.Spec; pod.ServiceAccountName != "tenant" || j.Spec.ActiveDeadlineSeconds == nil {
		t.Fatalf("the Job's pod runs as the bundle's ServiceAccount, for a bounded time: %q, %v", pod.ServiceAccountName, j.Spec.ActiveDeadlineSeconds)
	}
	if g := gate(st, "smoke"); !strings.HasPrefix(g, "Unknown job demo/"+name+" started") {
		t.Fatal(g)
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
	if _, err := kube.BatchV1().Jobs("demo").UpdateStatus(context.Background(), j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.once(bd, st)
	if g := gate(st, "smoke"); !strings.HasPrefix(g, "False job demo/"+name+" failed: BackoffLimitExceeded") {
		t.Fatal(g)
	}
	// The next deployment gets a Job of its own, which succeeds.
	bd.Spec.DeploymentID, st.AppliedDeploymentID = "c:2", "c:2"
	Clear(st)
	c.once(bd, st)
	j2, err := kube.BatchV1().Jobs("demo").Get(context.Background(), JobName("web", "smoke", "c:2"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j2.Status.Succeeded = 1
	if _, err := kube.BatchV1().Jobs("demo").UpdateStatus(context.Background(), j2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.once(bd, st)
	if g := gate(st, "smoke"); !strings.HasPrefix(g, "True ") {
		t.Fatal(g)
	}
}

// A gate is its policy's author's: its HTTP checks reach no loopback or link-local address (the
// node, a cloud metadata service), follow no redirect, take no proxy from the environment, and
// report the status code alone, never an error's text.
func TestHTTPGatesReachNoLocalAddress(t *testing.T) {
	var hits atomic.Int32
	count := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) })
	local := httptest.NewServer(count)
	defer local.Close()
	proxy := httptest.NewServer(count)
	defer proxy.Close()
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("HTTPS_PROXY", proxy.URL)
	t.Setenv("NO_PROXY", "")
	port := local.Listener.Addr().(*net.TCPAddr).Port
	c := newChecker(t, noClient, Options{})
	for _, u := range []string{local.URL + "/", fmt.Sprintf("http://localhost:%d/", port), fmt.Sprintf("http://[::1]:%d/", port),
		"http://169.254.169.254/latest/meta-data/", "http://[fe80::1%25lo]/", "http://0.0.0.0:1/"} {
		bd, st := gated(t, fleet.HealthGate{Name: "web", FailureThreshold: 1, HTTPGet: &fleet.HTTPGate{URL: u}})
		c.once(bd, st)
		if g, want := gate(st, "web"), "False GET "+u+": refused: a loopback or link-local address"; !strings.HasPrefix(g, want) {
			t.Errorf("%s: %s, want %s", u, g, want)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests reached a local address or the proxy", n)
	}
	// Where local addresses are allowed (the cluster's opt-in), a redirect is not followed: its
	// status is the answer.
	target := httptest.NewServer(count)
	defer target.Close()
	redirect := httptest.NewServer(http.RedirectHandler(target.URL, http.StatusFound))
	defer redirect.Close()
	c = newChecker(t, noClient, Options{AllowLocal: true})
	bd, st := gated(t, fleet.HealthGate{Name: "web", FailureThreshold: 1, HTTPGet: &fleet.HTTPGate{URL: redirect.URL}})
	c.once(bd, st)
	if g := gate(st, "web"); g != "False GET "+redirect.URL+": status 302" {
		t.Errorf("a redirect: %s", g)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests followed the redirect or went through the proxy", n)
	}
	// A server that hangs up: the gate says so, without the error's text.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte("SSH-2.0-secret-banner\r\n"))
			_ = conn.Close()
		}
	}()
	u := "http://" + l.Addr().String() + "/"
	bd, st = gated(t, fleet.HealthGate{Name: "web", FailureThreshold: 1, HTTPGet: &fleet.HTTPGate{URL: u}})
	c.once(bd, st)
	if g := gate(st, "web"); g != "False GET "+u+": no answer" {
		t.Errorf("a server that hangs up: %s", g)
	}
}

// Checks run off the pass: Evaluate returns while a gate's server has not answered, and no more
// than MaxChecksInFlight checks of one agent are under way at once.
func TestGateChecksRunOffThePassAtMostSomeAtOnce(t *testing.T) {
	release := make(chan struct{})
	var arrived atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived.Add(1)
		<-release
	}))
	defer srv.Close()
	defer close(release)
	c := newChecker(t, noClient, Options{AllowLocal: true})
	const n = 3 * MaxChecksInFlight
	for i := range n {
		bd, st := gated(t, fleet.HealthGate{Name: "slow", HTTPGet: &fleet.HTTPGate{URL: srv.URL, Timeout: &metav1.Duration{Duration: 30 * time.Second}}})
		bd.Name = fmt.Sprintf("web-%d", i)
		returned := make(chan struct{})
		go func() {
			c.Evaluate(context.Background(), bd, st, now)
			close(returned)
		}()
		select {
		case <-returned:
		case <-time.After(30 * time.Second):
			t.Fatal("Evaluate waited for a gate's server")
		}
		if g := gate(st, "slow"); !strings.HasPrefix(g, "Unknown ") {
			t.Fatalf("a check under way: %s", g)
		}
	}
	if got := len(c.slots); got != MaxChecksInFlight {
		t.Fatalf("%d checks under way, want %d", got, MaxChecksInFlight)
	}
	deadline := time.Now().Add(30 * time.Second)
	for arrived.Load() < MaxChecksInFlight && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := arrived.Load(); got != MaxChecksInFlight {
		t.Fatalf("%d requests reached the server, want %d", got, MaxChecksInFlight)
	}
}

// A Job gate runs where the bundle deploys, as the bundle's service account: one naming another
// namespace or service account fails at once, and makes no Job.
func TestJobGateStaysWithTheBundle(t *testing.T) {
	kube := fake.NewClientset()
	c := newChecker(t, func(context.Context, string) (kubernetes.Interface, error) { return kube, nil }, Options{})
	for _, tc := range []struct {
		job  fleet.JobGate
		want string
	}{
		{fleet.JobGate{Image: "busybox", Namespace: "kube-system"}, "False job.namespace kube-system: a Job gate runs only in the bundle's namespace demo"},
		{fleet.JobGate{Image: "busybox", ServiceAccountName: "cluster-admin-sa"}, `False job.serviceAccountName cluster-admin-sa: a Job gate runs only as the bundle's service account "tenant"`},
	} {
		bd, st := gated(t, fleet.HealthGate{Name: "smoke", Job: &tc.job})
		bd.Spec.Options.ServiceAccount = "tenant"
		c.once(bd, st)
		if g := gate(st, "smoke"); g != tc.want {
			t.Errorf("%s, want %s", g, tc.want)
		}
	}
	jobs, err := kube.BatchV1().Jobs("").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(jobs.Items) != 0 {
		t.Fatalf("jobs made: %v %v", jobs, err)
	}
}

// Whatever a gate asks, its checks keep to the bounds.
func TestGateBounds(t *testing.T) {
	if got := intervalOf(fleet.HealthGate{Interval: &metav1.Duration{Duration: time.Nanosecond}}); got != time.Second {
		t.Errorf("a 1ns interval: %s", got)
	}
	if got := intervalOf(fleet.HealthGate{Interval: &metav1.Duration{Duration: 1000 * time.Hour}}); got != 10*time.Minute {
		t.Errorf("a 1000h interval: %s", got)
	}
	many := make([]fleet.HealthGate, 17)
	for i := range many {
		many[i] = fleet.HealthGate{Name: fmt.Sprintf("g%d", i), HTTPGet: &fleet.HTTPGate{URL: "http://web/"}}
	}
	bd, st := gated(t, many...)
	if every := newChecker(t, noClient, Options{}).Evaluate(context.Background(), bd, st, now); every != 0 ||
		!strings.Contains(gate(st, "gates"), "17 gates, at most 16") {
		t.Errorf("17 gates: %s", gate(st, "gates"))
	}
}
