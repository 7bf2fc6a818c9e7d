package localcluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// BinDirEnv overrides where the control-plane binaries are found.
const BinDirEnv = "FLEET_CONTROLPLANE_BIN"

// kwokStagesFile is written by dev/controlplane beside the binaries: kwok's default stages.
const kwokStagesFile = "kwok-stages.yaml"

// binaryFor maps a component to its executable.
var binaryFor = map[string]string{
	"etcd":                    "etcd",
	"kube-apiserver":          "kube-apiserver",
	"kube-controller-manager": "kube-controller-manager",
	"kube-scheduler":          "kube-scheduler",
	"kwok":                    "kwok",
	"containerd":              "containerd",
	"kubelet":                 "kubelet",
	"kube-proxy":              "kube-proxy",
}

// BinDir returns $FLEET_CONTROLPLANE_BIN, or dev/bin of the module this process runs in (found
// by walking up from the working directory to the go.mod that has a dev/controlplane folder).
func BinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "dev", "controlplane", "go.mod")); err == nil {
			return filepath.Join(dir, "dev", "bin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("control-plane binaries: no dev/controlplane above the working directory; set %s", BinDirEnv)
		}
		dir = parent
	}
}

// checkBinaries fails before anything starts when a component of the tier is missing.
func checkBinaries(dir string, tier Tier) error {
	need := []string{"etcd", "kube-apiserver"}
	if tier >= Controllers {
		need = append(need, "kube-controller-manager")
	}
	switch tier {
	case Workloads:
		need = append(need, "kube-scheduler", "kwok", kwokStagesFile)
	case Node:
		need = append(need, "kube-scheduler", "kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2",
			"pause", "cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap")
	}
	var errs []error
	for _, n := range need {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s not found (build the control plane with `make controlplane`)", n, p))
		}
	}
	return errors.Join(errs...)
}

var (
	portsMu sync.Mutex
	// handedOut remembers ports given to components of this process, so clusters starting in
	// parallel never receive the same port between its probe and its use.
	handedOut = map[int]bool{}
)

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []int
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free port: %w", err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		if handedOut[port] {
			continue
		}
		handedOut[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}
