// Package serve runs the small HTTP endpoints of the manager and the agent: health and
// readiness, Prometheus metrics and Go's profiles.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	lassometrics "github.com/rancher/lasso/pkg/metrics"
	"github.com/sirupsen/logrus"

	"github.com/fleetgo/fleet/internal/metrics"
)

// Status is what the health endpoints report: whether the controllers run (ready) and whether
// the run has failed for good. Its methods do nothing on a nil Status.
type Status struct {
	ready  atomic.Bool
	failed atomic.Pointer[string]
}

// SetReady records whether the controllers run.
func (s *Status) SetReady(ready bool) {
	if s != nil {
		s.ready.Store(ready)
	}
}

// SetFailed records why the run has ended in failure.
func (s *Status) SetFailed(err error) {
	if s != nil && err != nil {
		msg := err.Error()
		s.failed.Store(&msg)
	}
}

// Ready reports whether the controllers run.
func (s *Status) Ready() bool { return s != nil && s.ready.Load() }

// Failure is why the run failed ("" while it has not).
func (s *Status) Failure() string {
	if s == nil {
		return ""
	}
	if msg := s.failed.Load(); msg != nil {
		return *msg
	}
	return ""
}

// Health serves /healthz (200 while the process is alive and its run has not failed: a replica
// waiting for the leader Lease, or retrying a failed start, is healthy) and /readyz (200 only
// while the controllers run).
func Health(s *Status) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if msg := s.Failure(); msg != "" {
			http.Error(w, "controllers failed: "+msg, http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !s.Ready() {
			http.Error(w, "controllers not running", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

var registerOnce sync.Once

// RegisterMetrics registers lasso's controller metrics and the work queues' metrics (depth,
// adds, latency, work duration, retries per controller) on the default Prometheus registry. It
// must run before any controller's queue is made; later calls do nothing.
func RegisterMetrics() {
	registerOnce.Do(func() { lassometrics.MustRegisterWithWorkqueue(prometheus.DefaultRegisterer) })
}

// Metrics serves the default Prometheus registry at /metrics, then the status families the
// manager exports (package metrics).
func Metrics() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler())
	return mux
}

// Profiles serves Go's runtime profiles under /debug/pprof/.
func Profiles() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	return mux
}

// Endpoints serves, until ctx ends, health and readiness on healthAddr, metrics on metricsAddr
// and profiles on profileAddr; an empty address serves nothing.
func Endpoints(ctx context.Context, healthAddr, metricsAddr, profileAddr string, status *Status) {
	RegisterMetrics()
	Run(ctx, healthAddr, Health(status))
	Run(ctx, metricsAddr, Metrics())
	Run(ctx, profileAddr, Profiles())
}

// Timeouts of the endpoints' HTTP servers.
const (
	// readHeaderTimeout bounds how long a client may take to send its request headers.
	readHeaderTimeout = 10 * time.Second
	// shutdownTimeout bounds how long requests in flight may finish once ctx ends.
	shutdownTimeout = 5 * time.Second
)

// Run serves h on addr until ctx ends; an empty address serves nothing.
func Run(ctx context.Context, addr string, h http.Handler) {
	if addr == "" {
		return
	}
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: readHeaderTimeout}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logrus.WithError(err).WithField("addr", addr).Error("http server stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
}
