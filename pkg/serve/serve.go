// Package serve runs the small HTTP endpoints of the manager and the agent: health and
// readiness, Prometheus metrics and Go's profiles.
package serve

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// Health serves /healthz (the process answers) and /readyz (ready is set).
func Health(ready *atomic.Bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "controllers not started", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// Metrics serves the default Prometheus registry at /metrics.
func Metrics() *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.Handler())
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
func Endpoints(ctx context.Context, healthAddr, metricsAddr, profileAddr string, ready *atomic.Bool) {
	Run(ctx, healthAddr, Health(ready))
	Run(ctx, metricsAddr, Metrics())
	Run(ctx, profileAddr, Profiles())
}

// Run serves h on addr until ctx ends; an empty address serves nothing.
func Run(ctx context.Context, addr string, h http.Handler) {
	if addr == "" {
		return
	}
	srv := &http.Server{Addr: addr, Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logrus.WithError(err).WithField("addr", addr).Error("http server stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
}
