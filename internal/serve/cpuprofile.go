package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"time"

	"github.com/sirupsen/logrus"
)

// RecordCPUProfiles profiles the process's CPU without pause until ctx ends, writing one
// profile per period into dir (cpu-<host name>-<UTC time>.pprof, the time the profile began, so
// that the pods sharing a volume keep apart): the fleet chart's cpuPprof value, whose volume is
// dir. A profile that cannot be written is logged and the next period tried again.
func RecordCPUProfiles(ctx context.Context, dir string, period time.Duration) {
	if dir == "" || period <= 0 {
		return
	}
	for ctx.Err() == nil {
		if err := recordCPUProfile(ctx, dir, period); err != nil {
			logrus.WithError(err).Warn("cpu profile")
			select {
			case <-ctx.Done():
			case <-time.After(period):
			}
		}
	}
}

// recordCPUProfile writes one profile of up to period (less when ctx ends first).
func recordCPUProfile(ctx context.Context, dir string, period time.Duration) error {
	host, _ := os.Hostname()
	name := filepath.Join(dir, "cpu-"+host+"-"+time.Now().UTC().Format("20060102T150405.000Z")+".pprof")
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		os.Remove(name)
		return fmt.Errorf("%s: %w", name, err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(period):
	}
	pprof.StopCPUProfile()
	return f.Close()
}
