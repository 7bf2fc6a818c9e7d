package testenv

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/fleetgo/fleet/internal/cmd"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
)

// FleetCLI runs the fleet command line in-process and returns what it printed.
func FleetCLI(args ...string) (string, error) {
	var out bytes.Buffer
	c := cmd.New()
	c.SetArgs(args)
	c.SetOut(&out)
	err := c.ExecuteContext(context.Background())
	return out.String(), err
}

// KubectlApply applies a manifest with dev/bin's kubectl, as a user would; wrap, when set,
// turns the command into the one to run (to run it inside a network namespace).
func KubectlApply(kubeconfig, manifest string, wrap func(name string, args ...string) *exec.Cmd) error {
	dir, err := localcluster.BinDir()
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig", kubeconfig, "apply", "-f", "-"}
	c := exec.Command(filepath.Join(dir, "kubectl"), args...)
	if wrap != nil {
		c = wrap(filepath.Join(dir, "kubectl"), args...)
	}
	c.Stdin = strings.NewReader(manifest)
	if out, err := c.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl apply: %w: %s", err, out)
	}
	return nil
}
