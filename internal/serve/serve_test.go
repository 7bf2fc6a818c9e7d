package serve

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func TestHealthFollowsStatus(t *testing.T) {
	s := &Status{}
	h := Health(s)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if c, _ := get("/healthz"); c != http.StatusOK {
		t.Errorf("waiting or starting: healthz %d", c)
	}
	if c, _ := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("not running yet: readyz %d", c)
	}
	s.SetReady(true)
	if c, _ := get("/readyz"); c != http.StatusOK {
		t.Errorf("running: readyz %d", c)
	}
	s.SetReady(false)
	s.SetFailed(errors.New("bootstrap: forbidden"))
	if c, body := get("/healthz"); c != http.StatusInternalServerError || !strings.Contains(body, "bootstrap: forbidden") {
		t.Errorf("failed: healthz %d %q", c, body)
	}
	if c, _ := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("failed: readyz %d", c)
	}
	var none *Status
	none.SetReady(true)
	none.SetFailed(errors.New("x"))
	if none.Ready() || none.Failure() != "" {
		t.Error("a nil Status reports nothing")
	}
}

// The work queues of controllers show on /metrics, by queue name.
func TestWorkqueueMetricsRegistered(t *testing.T) {
	RegisterMetrics()
	RegisterMetrics() // a second call (a second run in one process) must not panic
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "serve-test-queue"})
	defer q.ShutDown()
	q.Add("a")
	rec := httptest.NewRecorder()
	Metrics().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{`workqueue_adds_total{name="serve-test-queue"} 1`, `workqueue_depth{name="serve-test-queue"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// CPU profiles are written one per period into the directory, each a profile pprof can read.
func TestRecordCPUProfiles(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { RecordCPUProfiles(ctx, dir, 50*time.Millisecond); close(done) }()
	deadline := time.Now().Add(time.Minute)
	for {
		files, _ := filepath.Glob(filepath.Join(dir, "cpu-*.pprof"))
		if len(files) >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	<-done
	files, _ := filepath.Glob(filepath.Join(dir, "cpu-*.pprof"))
	if len(files) < 2 {
		t.Fatalf("profiles: %v", files)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// A profile is a gzipped protocol buffer.
		if len(data) < 2 || data[0] != 0x1f || data[1] != 0x8b {
			t.Errorf("%s: not a profile (%d bytes)", f, len(data))
		}
	}
}
