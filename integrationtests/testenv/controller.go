package testenv

import (
	"context"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
)

// RunController runs the manager's controllers in-process against cfg with conf in force (unset
// intervals at their defaults) unless o.Config holds the configuration already, with the system
// namespace cattle-fleet-system and four workers unless o says otherwise. stop ends them and
// returns what the run returned.
func RunController(cfg *rest.Config, conf config.Config, o controller.Options) (stop func() error) {
	if o.Config == nil {
		o.Config = config.NewStore(conf.WithDefaults())
	}
	if o.SystemNamespace == "" {
		o.SystemNamespace = "cattle-fleet-system"
	}
	if o.Workers == 0 {
		o.Workers = 4
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx, cfg, o) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return context.DeadlineExceeded
		}
	}
}
