// Package leader runs a process's controllers, optionally only while it holds a leader Lease,
// so that a start that fails is retried with backoff and, when it keeps failing, ends the run
// with an error (the process exits non-zero) and gives the Lease up: a replica never sits as a
// healthy-looking leader that reconciles nothing. The manager and the agent use it.
package leader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/fleetgo/fleet/internal/serve"
)

// Lease timing by default, as wrangler's leader election uses it.
const (
	LeaseDuration = 45 * time.Second
	RenewDeadline = 30 * time.Second
	RetryPeriod   = 2 * time.Second
	// DefaultStartTimeout is how long a failing start is retried before the run gives up.
	DefaultStartTimeout = 5 * time.Minute
)

// Options say what to run and how.
type Options struct {
	// Elect runs Start only while holding the Lease Name in Namespace.
	Elect     bool
	Namespace string
	Name      string
	Kube      kubernetes.Interface
	// Identity holds the Lease; empty means the host name with a random suffix (identity).
	Identity string
	// Start registers and starts the controllers; it returns once they run (they stop with ctx).
	Start func(ctx context.Context) error
	// Warm, with Elect, runs once as the run begins, beside the campaign for the Lease: what a
	// replica can make ready before it leads (a standby's caches), so that taking over is only
	// the controllers' pass. Start does not wait for it: Start takes what it made so far.
	Warm func(ctx context.Context)
	// StartTimeout bounds the retries of a failing Start; zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// Health is told when the controllers run and when the run failed.
	Health *serve.Status
	// Timing of the Lease; zero fields take the defaults above.
	Timing Timing
}

// Timing is the Lease's timing (Fleet's leaderElection.leaseDuration, renewDeadline and
// retryPeriod chart values).
type Timing struct {
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
}

// withDefaults fills zero fields with the package defaults.
func (t Timing) withDefaults() Timing {
	if t.LeaseDuration <= 0 {
		t.LeaseDuration = LeaseDuration
	}
	if t.RenewDeadline <= 0 {
		t.RenewDeadline = RenewDeadline
	}
	if t.RetryPeriod <= 0 {
		t.RetryPeriod = RetryPeriod
	}
	return t
}

// ErrLostLease ends a run whose Lease was taken or could not be renewed.
var ErrLostLease = errors.New("lost the leader lease")

// Run runs until ctx ends (nil) or the controllers cannot be started or the Lease is lost (an
// error). With Elect, the Lease is released when the run ends.
func Run(ctx context.Context, o Options) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	failed := make(chan error, 2)
	if o.Elect && o.Warm != nil {
		go o.Warm(ctx)
	}
	run := func(ctx context.Context) {
		if err := startWithRetry(ctx, o); err != nil {
			if ctx.Err() == nil {
				failed <- err
			}
			return
		}
		o.Health.SetReady(true)
	}
	if !o.Elect {
		go run(ctx)
		return await(ctx, failed, o.Health)
	}
	id := o.Identity
	if id == "" {
		var err error
		if id, err = identity(); err != nil {
			return err
		}
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, o.Namespace, o.Name, o.Kube.CoreV1(), o.Kube.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: id})
	if err != nil {
		return err
	}
	t := o.Timing.withDefaults()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: t.LeaseDuration, RenewDeadline: t.RenewDeadline, RetryPeriod: t.RetryPeriod,
		ReleaseOnCancel: true, Name: o.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { go run(ctx) },
			OnStoppedLeading: func() {
				if ctx.Err() == nil {
					failed <- ErrLostLease
				}
			},
		},
	})
	if err != nil {
		return err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		le.Run(ctx)
	}()
	err = await(ctx, failed, o.Health)
	// Ending the elector's context releases the Lease (ReleaseOnCancel) before Run returns.
	cancel()
	<-done
	return err
}

// identity names this process in the Lease: the host name (a pod's name) and a random suffix,
// so that two replicas on one host (hostNetwork pods, or processes on one machine) never take one
// another for the holder and both lead.
func identity() (string, error) {
	h, err := os.Hostname()
	if err != nil {
		return "", err
	}
	return h + "_" + suffix(), nil
}

// suffix tells apart the runs of processes on one host.
var suffix = uuid.NewString

func await(ctx context.Context, failed <-chan error, h *serve.Status) error {
	select {
	case <-ctx.Done():
		return nil
	case err := <-failed:
		h.SetReady(false)
		h.SetFailed(err)
		return err
	}
}

// startWithRetry calls Start until it succeeds, backing off between attempts, for at most
// StartTimeout.
func startWithRetry(ctx context.Context, o Options) error {
	timeout := o.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	deadline := time.Now().Add(timeout)
	// Doubling from a second: about eight attempts in five minutes.
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.1, Steps: 64}
	err := wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		err := o.Start(ctx)
		if err == nil {
			return true, nil
		}
		if time.Now().After(deadline) {
			return false, err
		}
		logrus.WithError(err).Warn("starting controllers failed; retrying")
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("starting controllers (retried for %s): %w", timeout, err)
	}
	return nil
}
