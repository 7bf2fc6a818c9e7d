package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/harness/chartinstall"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// env is one management cluster with its fleet controller processes.
type env struct {
	mgr  *localcluster.Cluster
	kube kubernetes.Interface
	api  fleetcontrollers.Interface
	// procs are the controller processes by shard ID ("" for the unsharded one).
	procs map[string]*exec.Cmd
	// serverPID holds the cluster's kube-apiserver and etcd PIDs by name, found once (serverPIDs).
	serverPID map[string]int
	// webhook is the unsharded controller's webhook receiver address; profiles its profile
	// address (with -profile).
	webhook, profiles string
}

// newEnv starts a management cluster (etcd and kube-apiserver), installs the CRDs and writes
// the manager's configuration: where agents reach it, and their check-in interval.
func newEnv(ctx context.Context, name string, checkin time.Duration) (*env, error) {
	mgr, err := localcluster.Start(ctx, localcluster.Options{Name: name})
	if err != nil {
		return nil, err
	}
	e := &env{mgr: mgr, procs: map[string]*exec.Cmd{}}
	running.Store(e, true)
	if err := e.setup(ctx, checkin); err != nil {
		e.stop()
		return nil, err
	}
	return e, nil
}

func (e *env) setup(ctx context.Context, checkin time.Duration) error {
	if _, err := chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{Kubeconfig: e.mgr.Kubeconfig, Namespace: fleet.SystemNamespace,
		ReleaseName: "fleet-crd", ChartDir: "charts/fleet-crd", Wait: true}); err != nil {
		return err
	}
	cfg := e.mgr.RESTConfig()
	cfg.QPS, cfg.Burst = 2000, 4000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ff, err := fleetfactory.NewFactoryFromConfig(cfg)
	if err != nil {
		return err
	}
	e.kube, e.api = kube, ff.Fleet().V1alpha1()
	for _, ns := range []string{fleet.SystemNamespace, fleet.DefaultNamespace, rawNamespace} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	ca := cfg.CAData
	if len(ca) == 0 && cfg.CAFile != "" {
		if ca, err = os.ReadFile(cfg.CAFile); err != nil {
			return err
		}
	}
	cm, err := config.Config{APIServerURL: cfg.Host, APIServerCA: string(ca), AgentCheckinInterval: metav1.Duration{Duration: checkin}}.ConfigMap(fleet.SystemNamespace)
	if err != nil {
		return err
	}
	if _, err := kube.CoreV1().ConfigMaps(fleet.SystemNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	return waitFor(time.Minute, func() (bool, error) {
		_, err := e.api.Cluster().List(fleet.DefaultNamespace, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	})
}

// running are the environments not stopped yet.
var running sync.Map

// stopAll stops every running environment.
func stopAll() {
	running.Range(func(k, _ any) bool {
		k.(*env).stop()
		return true
	})
}

func (e *env) stop() {
	running.Delete(e)
	for _, p := range e.procs {
		_ = p.Process.Kill()
		_, _ = p.Process.Wait()
	}
	e.mgr.Stop()
}

// startController runs `fleet controller` (the shard's when id is set) as its own process.
func (e *env) startController(fleetBin, id string) error {
	name := "fleet-controller"
	args := []string{"--leader-elect=false", "--health-addr=", "--metrics-addr="}
	if id == "" {
		addr, err := freeAddr()
		if err != nil {
			return err
		}
		e.webhook = addr
		args = append(args, "--webhook-addr="+addr)
		if profileDir != "" {
			if e.profiles, err = freeAddr(); err != nil {
				return err
			}
			args = append(args, "--profile-addr="+e.profiles)
		}
	} else {
		name += "-shard-" + id
		args = append(args, "--shard-id="+id)
	}
	return e.launch(fleetBin, id, name, args)
}

// launch runs `fleet controller` with args as its own process, kept in procs under key, logging
// into the cluster's log folder as name.log.
func (e *env) launch(fleetBin, key, name string, args []string) error {
	log, err := os.OpenFile(filepath.Join(e.mgr.LogDir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args = append([]string{"controller", "--kubeconfig", e.mgr.Kubeconfig, "--manage-agents=false"}, args...)
	cmd := exec.Command(fleetBin, args...)
	if memLimit != "" {
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+memLimit)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return err
	}
	e.procs[key] = cmd
	return nil
}

// usage is what a controller process used: CPU seconds so far and peak RSS; others the CPU
// seconds so far of the processes beside it (env.cpus).
type usage struct {
	CPU     float64 `json:"cpuSeconds"`
	PeakMiB float64 `json:"peakRSSMiB"`
	others  map[string]float64
}

func (e *env) usage(id string) usage {
	pid := e.procs[id].Process.Pid
	return usage{CPU: proc.CPUSeconds(pid), PeakMiB: proc.PeakRSS(pid), others: e.cpus()}
}

// token creates a ClusterRegistrationToken and returns the values its Secret hands out.
func (e *env) token(ctx context.Context, name string) (registration.Values, error) {
	var v registration.Values
	if _, err := e.api.ClusterRegistrationToken().Create(&fleet.ClusterRegistrationToken{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace}}); err != nil {
		return v, err
	}
	err := waitFor(2*time.Minute, func() (bool, error) {
		t, err := e.api.ClusterRegistrationToken().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
		if err != nil || t.Status.SecretName == "" {
			return false, nil
		}
		s, err := e.kube.CoreV1().Secrets(fleet.DefaultNamespace).Get(ctx, t.Status.SecretName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return true, yaml.Unmarshal(s.Data[registration.ValuesKey], &v)
	})
	return v, err
}

// waitFor polls done every 200ms until it says true, returns an error, or timeout passes.
func waitFor(timeout time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not done after %s", timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// freeAddr is a loopback address with a port free at the time of asking.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Servers is what the management cluster's own processes used by the end of a size: the
// figures the estimates for more clusters are made from.
type Servers struct {
	APIServerPeakMiB float64 `json:"apiserverPeakRSSMiB"`
	EtcdPeakMiB      float64 `json:"etcdPeakRSSMiB"`
	// EtcdDBMiB is the size of etcd's database file (it grows to the largest the data has
	// been, and is not compacted back).
	EtcdDBMiB float64 `json:"etcdDBMiB"`
	// SimulatorPeakMiB is this process (the simulated agents and the benchmark's caches).
	SimulatorPeakMiB float64 `json:"simulatorPeakRSSMiB"`
}

// serverPIDs finds the cluster's kube-apiserver and etcd processes by their folder in the
// cluster's Dir, by name; once both are found they are kept.
func (e *env) serverPIDs() map[string]int {
	if len(e.serverPID) == 2 {
		return e.serverPID
	}
	e.serverPID = proc.ServerPIDs(e.mgr.Dir)
	return e.serverPID
}

// cpus reads the CPU seconds so far of the apiserver, etcd and this process (the simulated
// agents and the benchmark's caches): what shares the machine with the manager.
func (e *env) cpus() map[string]float64 {
	out := map[string]float64{"simulator": proc.CPUSeconds(os.Getpid())}
	for name, pid := range e.serverPIDs() {
		out[name] = proc.CPUSeconds(pid)
	}
	return out
}

// servers reads the peak RSS of the cluster's kube-apiserver and etcd and etcd's database size.
func (e *env) servers() Servers {
	var s Servers
	for name, pid := range e.serverPIDs() {
		switch name {
		case "kube-apiserver":
			s.APIServerPeakMiB = proc.PeakRSS(pid)
		case "etcd":
			s.EtcdPeakMiB = proc.PeakRSS(pid)
		}
	}
	if fi, err := os.Stat(filepath.Join(e.mgr.Dir, "etcd", "member", "snap", "db")); err == nil {
		s.EtcdDBMiB = float64(fi.Size()) / (1 << 20)
	}
	s.SimulatorPeakMiB = proc.PeakRSS(os.Getpid())
	return s
}
