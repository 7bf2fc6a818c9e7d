package gates

import (
	"context"
	"encoding/json"
	"fmt"
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
	c := New(func(context.Context, string) (kubernetes.Interface, error) { return fake.NewClientset(), nil })
	bd, st := gated(t, fleet.HealthGate{Name: "web", HTTPGet: &fleet.HTTPGate{URL: srv.URL + "/healthz"}, FailureThreshold: 2})
	if every := c.Evaluate(context.Background(), bd, st, now); every != 10*time.Second || !strings.HasPrefix(gate(st, "web"), "True ") {
		t.Fatalf("%s, every %s", gate(st, "web"), every)
	}
	code.Store(500)
	c.Evaluate(context.Background(), bd, st, now)
	if g := gate(st, "web"); !strings.HasPrefix(g, "True ") {
		t.Fatalf("one failure keeps the last result: %s", g)
	}
	c.Evaluate(context.Background(), bd, st, now)
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
	c := New(func(context.Context, string) (kubernetes.Interface, error) { return fake.NewClientset(), nil })
	g := fleet.HealthGate{Name: "errors", FailureThreshold: 1, Prometheus: &fleet.PrometheusGate{URL: srv.URL, Query: "rate(errors[1m])", Op: "<", Threshold: "0.05"}}
	bd, st := gated(t, g)
	c.Evaluate(context.Background(), bd, st, now)
	if got := gate(st, "errors"); got != `True query "rate(errors[1m])" = 0.02, wanted < 0.05` {
		t.Fatal(got)
	}
	value = "0.5"
	c.Evaluate(context.Background(), bd, st, now)
	if got := gate(st, "errors"); !strings.HasPrefix(got, "False ") {
		t.Fatal(got)
	}
	// No Prometheus there: reported, naming the field.
	g.Prometheus.URL = "http://127.0.0.1:1"
	bd, st = gated(t, g)
	c.Evaluate(context.Background(), bd, st, now)
	if got := gate(st, "errors"); !strings.HasPrefix(got, "False prometheus.url http://127.0.0.1:1") {
		t.Fatal(got)
	}
}

func TestJobGate(t *testing.T) {
	kube := fake.NewClientset()
	var as []string
	c := New(func(_ context.Context, sa string) (kubernetes.Interface, error) {
		as = append(as, sa)
		return kube, nil
	})
	bd, st := gated(t, fleet.HealthGate{Name: "smoke", Job: &fleet.JobGate{Image: "busybox", Command: []string{"true"}}})
	bd.Spec.Options.ServiceAccount = "tenant"
	c.Evaluate(context.Background(), bd, st, now)
	if len(as) != 1 || as[0] != "tenant" {
		t.Fatalf("the Job is made as the bundle's ServiceAccount: %v", as)
	}
	name := JobName("web", "smoke", "c:1")
	j, err := kube.BatchV1().Jobs("demo").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil || j.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("job: %v", err)
	}
	if g := gate(st, "smoke"); !strings.HasPrefix(g, "Unknown job demo/"+name+" started") {
		t.Fatal(g)
	}
	j.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobFailed, Status: corev1.ConditionTrue, Reason: "BackoffLimitExceeded"}}
	if _, err := kube.BatchV1().Jobs("demo").UpdateStatus(context.Background(), j, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Evaluate(context.Background(), bd, st, now)
	if g := gate(st, "smoke"); !strings.HasPrefix(g, "False job demo/"+name+" failed: BackoffLimitExceeded") {
		t.Fatal(g)
	}
	// The next deployment gets a Job of its own, which succeeds.
	bd.Spec.DeploymentID, st.AppliedDeploymentID = "c:2", "c:2"
	Clear(st)
	c.Evaluate(context.Background(), bd, st, now)
	j2, err := kube.BatchV1().Jobs("demo").Get(context.Background(), JobName("web", "smoke", "c:2"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j2.Status.Succeeded = 1
	if _, err := kube.BatchV1().Jobs("demo").UpdateStatus(context.Background(), j2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.Evaluate(context.Background(), bd, st, now)
	if g := gate(st, "smoke"); !strings.HasPrefix(g, "True ") {
		t.Fatal(g)
	}
}
