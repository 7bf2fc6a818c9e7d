// Package testenv holds the setup integration suites share: a real apiserver with the fleet
// CRDs installed from charts/fleet-crd, and the generated clients.
package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/fleetgo/fleet/internal/harness/chartinstall"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// RepoRoot is the folder of the module's go.mod, found from the working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "charts", "fleet-crd", "Chart.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no charts/fleet-crd above the working directory")
		}
		dir = parent
	}
}

// StartWithCRDs starts an apiserver-tier cluster, installs the fleet-crd chart with the Helm
// SDK and waits until the fleet API is served. The caller stops the cluster.
func StartWithCRDs(ctx context.Context, name string) (*localcluster.Cluster, fleetcontrollers.Interface, error) {
	return StartWithCRDsOptions(ctx, localcluster.Options{Name: name})
}

// StartWithCRDsOptions is StartWithCRDs for a cluster started with o.
func StartWithCRDsOptions(ctx context.Context, o localcluster.Options) (*localcluster.Cluster, fleetcontrollers.Interface, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	c, err := localcluster.Start(ctx, o)
	if err != nil {
		return nil, nil, err
	}
	fail := func(err error) (*localcluster.Cluster, fleetcontrollers.Interface, error) {
		c.Stop()
		return nil, nil, err
	}
	if _, err := chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{
		Kubeconfig: c.Kubeconfig, Namespace: "cattle-fleet-system", ReleaseName: "fleet-crd",
		ChartDir: filepath.Join(root, "charts", "fleet-crd"), Wait: true,
	}); err != nil {
		return fail(err)
	}
	f, err := fleetfactory.NewFactoryFromConfig(c.RESTConfig())
	if err != nil {
		return fail(err)
	}
	api := f.Fleet().V1alpha1()
	// CRDs are served a moment after they are established.
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := api.Bundle().List("default", metav1.ListOptions{Limit: 1})
		if err == nil {
			return c, api, nil
		}
		if time.Now().After(deadline) {
			return fail(fmt.Errorf("fleet API not served: %w", err))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// UpdateBundle applies mutate to the Bundle and writes it, reading it again after a conflict.
func UpdateBundle(api fleetcontrollers.Interface, ns, name string, mutate func(*fleet.Bundle)) error {
	return update(func() (*fleet.Bundle, error) { return api.Bundle().Get(ns, name, metav1.GetOptions{}) }, api.Bundle().Update, mutate)
}

// UpdateGitRepo applies mutate to the GitRepo and writes it, reading it again after a conflict.
func UpdateGitRepo(api fleetcontrollers.Interface, ns, name string, mutate func(*fleet.GitRepo)) error {
	return update(func() (*fleet.GitRepo, error) { return api.GitRepo().Get(ns, name, metav1.GetOptions{}) }, api.GitRepo().Update, mutate)
}

func update[T any](get func() (T, error), put func(T) (T, error), mutate func(T)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := get()
		if err != nil {
			return err
		}
		mutate(obj)
		_, err = put(obj)
		return err
	})
}

// FleetBinary is the fleet binary the e2e suites run: bin/fleet when `make build` made it (as
// `make e2e` does), else one built now and removed when the calling node's cleanup runs.
func FleetBinary() string {
	GinkgoHelper()
	root, err := RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	bin := filepath.Join(root, "bin", "fleet")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	bin, err = gexec.Build("github.com/fleetgo/fleet")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(gexec.CleanupBuildArtifacts)
	return bin
}
