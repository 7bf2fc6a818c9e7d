// Package chartinstall installs or upgrades a local Helm chart with the Helm SDK. The quickstart,
// the e2e suite and integration tests use it to install charts/fleet-crd, charts/fleet and
// charts/fleet-agent exactly as `helm upgrade --install` would.
package chartinstall

import (
	"context"
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	"k8s.io/cli-runtime/pkg/genericclioptions"
)

// DefaultTimeout bounds an install when Options.Timeout is zero.
const DefaultTimeout = 2 * time.Minute

// Options describe one release.
type Options struct {
	// Kubeconfig is the path of the target cluster's kubeconfig.
	Kubeconfig string
	// Namespace is the release namespace; it is created if missing.
	Namespace string
	// ReleaseName is the Helm release name.
	ReleaseName string
	// ChartDir is the chart's folder.
	ChartDir string
	// Values are the chart values.
	Values map[string]any
	// Wait waits for the release's resources to be ready.
	Wait bool
	// Timeout bounds the operation; zero means DefaultTimeout.
	Timeout time.Duration
}

// InstallOrUpgrade installs the chart, or upgrades the release if it exists.
func InstallOrUpgrade(ctx context.Context, o Options) (*release.Release, error) {
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	chart, err := loader.Load(o.ChartDir)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", o.ChartDir, err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &o.Kubeconfig
	flags.Namespace = &o.Namespace
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, o.Namespace, "secret", func(string, ...any) {}); err != nil {
		return nil, fmt.Errorf("helm configuration for %s: %w", o.Kubeconfig, err)
	}

	_, err = action.NewHistory(cfg).Run(o.ReleaseName)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		install := action.NewInstall(cfg)
		install.ReleaseName = o.ReleaseName
		install.Namespace = o.Namespace
		install.CreateNamespace = true
		install.Wait = o.Wait
		install.Timeout = o.Timeout
		rel, err := install.RunWithContext(ctx, chart, o.Values)
		if err != nil {
			return nil, fmt.Errorf("installing %s into %s: %w", o.ReleaseName, o.Namespace, err)
		}
		return rel, nil
	case err != nil:
		return nil, fmt.Errorf("reading history of %s: %w", o.ReleaseName, err)
	}
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = o.Namespace
	upgrade.Wait = o.Wait
	upgrade.Timeout = o.Timeout
	rel, err := upgrade.RunWithContext(ctx, o.ReleaseName, chart, o.Values)
	if err != nil {
		return nil, fmt.Errorf("upgrading %s in %s: %w", o.ReleaseName, o.Namespace, err)
	}
	return rel, nil
}
