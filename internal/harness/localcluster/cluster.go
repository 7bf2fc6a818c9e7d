// Package localcluster starts real, independent Kubernetes control planes on loopback: etcd and
// kube-apiserver, optionally kube-controller-manager, and optionally kube-scheduler with kwok and
// one fake Node so ordinary workload Pods become Running and Ready. Integration tests, the e2e
// suite and the quickstart (dev/up) use it; the binaries come from dev/controlplane.
package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Tier says how much of a control plane a cluster runs.
type Tier int

const (
	// APIServer runs etcd and kube-apiserver only: enough for CRDs, RBAC and controllers under test.
	APIServer Tier = iota + 1
	// Controllers adds kube-controller-manager: garbage collection, ServiceAccount tokens and
	// namespaces, Deployments, ReplicaSets and Jobs.
	Controllers
	// Workloads adds kube-scheduler and kwok with one fake Node, so Pods are scheduled and become
	// Running and Ready without a kubelet.
	Workloads
	// Node adds kube-scheduler and one real node instead of kwok: a kubelet, containerd with
	// runc, CNI bridge networking and kube-proxy, in the cluster's network namespace
	// (Options.Node), so Pods really run. Needs root.
	Node
)

func (t Tier) String() string {
	switch t {
	case APIServer:
		return "apiserver"
	case Controllers:
		return "controllers"
	case Workloads:
		return "workloads"
	case Node:
		return "node"
	}
	return "tier(" + strconv.Itoa(int(t)) + ")"
}

const (
	// DefaultStartTimeout bounds how long one component may take to become ready. Several
	// apiservers starting at once on two cores take tens of seconds.
	DefaultStartTimeout = 3 * time.Minute
	// pollInterval is how often readiness is probed while a component starts.
	pollInterval = 200 * time.Millisecond
	// FakeNodeName is the kwok-managed Node of a Workloads cluster.
	FakeNodeName = "kwok-node-0"
	// serviceCIDR is the Service IP range; every cluster may use the same one, they share nothing.
	serviceCIDR = "10.96.0.0/16"
)

// Options describe one cluster to start.
type Options struct {
	// Name identifies the cluster in logs, certificates and the kubeconfig context.
	Name string
	// Tier chooses the components; the zero value means APIServer.
	Tier Tier
	// Dir holds certificates, data and logs; empty means a new temporary folder, removed by Stop.
	Dir string
	// BinDir holds the control-plane binaries; empty means BinDir().
	BinDir string
	// APIServerPort fixes the apiserver's port; zero picks a free one.
	APIServerPort int
	// StartTimeout bounds each component's start; zero means DefaultStartTimeout.
	StartTimeout time.Duration
	// NetNS runs every component inside this network namespace (see NewNetNS); the admin
	// client reaches them from inside it.
	NetNS string
	// BindAddress is where the apiserver listens (default 127.0.0.1); ExtraIPs are added to its
	// certificate, for clients reaching it at another address.
	BindAddress string
	ExtraIPs    []net.IP
	// Node configures the real node of the Node tier; its network namespace is the cluster's.
	Node *NodeOptions
}

// Cluster is one running control plane.
type Cluster struct {
	Name string
	Tier Tier
	// Dir is the cluster's folder; LogDir holds one log file per component.
	Dir, LogDir string
	// Kubeconfig is the path of an admin kubeconfig (group system:masters).
	Kubeconfig string
	// Server is the apiserver URL.
	Server string

	restConfig *rest.Config
	procs      []*process
	node       *nodeStarter
	removeDir  bool
	stopOnce   sync.Once
}

// RESTConfig returns a copy of the admin client configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Clientset returns an admin clientset.
func (c *Cluster) Clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(c.RESTConfig())
}

// StartAll starts several clusters at once. If any fails, the ones already started are stopped
// and the errors of all failures are returned.
func StartAll(ctx context.Context, opts ...Options) ([]*Cluster, error) {
	clusters := make([]*Cluster, len(opts))
	errs := make([]error, len(opts))
	var wg sync.WaitGroup
	for i := range opts {
		wg.Go(func() { clusters[i], errs[i] = Start(ctx, opts[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range clusters {
			if c != nil {
				c.Stop()
			}
		}
		return nil, err
	}
	return clusters, nil
}

// Start starts one cluster and returns when every component of its tier is ready. On failure
// nothing is left running and the error names the component and its log file.
func Start(ctx context.Context, o Options) (_ *Cluster, err error) {
	if o.Name == "" {
		o.Name = "cluster"
	}
	if o.Tier == 0 {
		o.Tier = APIServer
	}
	if o.Tier == Node {
		if o.Node == nil || o.Node.Net == nil {
			return nil, fmt.Errorf("cluster %s: the node tier needs Options.Node with a network namespace", o.Name)
		}
		// The whole cluster lives in the node's namespace; pods reach the apiserver at the
		// node's address through the kubernetes Service.
		o.NetNS = o.Node.Net.Name
		o.BindAddress = "0.0.0.0"
		o.ExtraIPs = append(o.ExtraIPs, o.Node.Net.NSIP)
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.BinDir == "" {
		if o.BinDir, err = BinDir(); err != nil {
			return nil, err
		}
	}
	if err := checkBinaries(o.BinDir, o.Tier); err != nil {
		return nil, fmt.Errorf("cluster %s: %w", o.Name, err)
	}

	c := &Cluster{Name: o.Name, Tier: o.Tier, Dir: o.Dir}
	if c.Dir == "" {
		if c.Dir, err = os.MkdirTemp("", "localcluster-"+o.Name+"-"); err != nil {
			return nil, err
		}
		c.removeDir = true
	}
	c.LogDir = filepath.Join(c.Dir, "logs")
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("cluster %s: %w", o.Name, err)
			c.stopProcesses()
			if c.removeDir {
				_ = os.RemoveAll(c.Dir)
			}
		}
	}()

	s := &starter{c: c, o: o, ctx: ctx}
	steps := []func() error{s.certificates, s.etcd, s.apiserver}
	if o.Tier >= Controllers {
		steps = append(steps, s.controllerManager)
	}
	switch o.Tier {
	case Workloads:
		steps = append(steps, s.scheduler, s.kwok)
	case Node:
		steps = append(steps, s.scheduler, s.node)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Stop ends every component (SIGTERM, then SIGKILL) and removes a temporary folder. It is safe
// to call more than once.
func (c *Cluster) Stop() {
	c.stopOnce.Do(func() {
		c.stopProcesses()
		if c.removeDir {
			_ = os.RemoveAll(c.Dir)
		}
	})
}

func (c *Cluster) stopProcesses() {
	// Reverse order: clients of the apiserver first, etcd last.
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].stop()
	}
	if c.node != nil {
		c.node.cleanup()
	}
}

// Healthy returns an error naming the first component that has exited.
func (c *Cluster) Healthy() error {
	for _, p := range c.procs {
		if done, _ := p.exited(); done {
			return p.diedError()
		}
	}
	return nil
}

// WriteLogTails writes the last n lines of every component's log, for a failed test's report,
// and keeps the cluster's folder (logs, data, certificates) on Stop for a closer look.
func (c *Cluster) WriteLogTails(w io.Writer, n int) {
	c.removeDir = false
	fmt.Fprintf(w, "----- cluster %s: folder %s kept for inspection -----\n", c.Name, c.Dir)
	for _, p := range c.procs {
		fmt.Fprintf(w, "----- cluster %s: %s (%s), last %d lines -----\n%s\n", c.Name, p.component, p.logPath, n, tailFile(p.logPath, n))
	}
}

// starter carries what the start steps share.
type starter struct {
	c   *Cluster
	o   Options
	ctx context.Context
	pki *pki

	etcdURL string
}

func (s *starter) bin(name string) string { return filepath.Join(s.o.BinDir, name) }

func (s *starter) run(component string, args ...string) (*process, error) {
	bin := s.bin(binaryFor[component])
	if s.o.NetNS != "" {
		ip, err := exec.LookPath("ip")
		if err != nil {
			return nil, fmt.Errorf("%s: running in network namespace %s needs ip(8): %w", component, s.o.NetNS, err)
		}
		args = append([]string{"netns", "exec", s.o.NetNS, bin}, args...)
		bin = ip
	}
	p, err := startProcess(component, bin, args, s.c.LogDir)
	if err != nil {
		return nil, err
	}
	s.c.procs = append(s.c.procs, p)
	return p, nil
}

// waitFor polls ready until it reports true, the component dies, or the start timeout passes.
func (s *starter) waitFor(p *process, what string, ready func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.o.StartTimeout)
	defer cancel()
	var last error
	for {
		if done, _ := p.exited(); done {
			return p.diedError()
		}
		ok, err := ready(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not become ready (%s) within %s: last error %v; log %s:\n%s",
				p.component, what, s.o.StartTimeout, last, p.logPath, tailFile(p.logPath, 20))
		case <-time.After(pollInterval):
		}
	}
}

func (s *starter) certificates() error {
	p, err := newPKI(filepath.Join(s.c.Dir, "pki"), s.c.Name)
	if err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	s.pki = p
	ips := append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")}, s.o.ExtraIPs...)
	dns := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}
	if err := p.issue("apiserver", "kube-apiserver", nil, true, ips, dns); err != nil {
		return err
	}
	if err := p.issue("admin", "admin", []string{"system:masters"}, false, nil, nil); err != nil {
		return err
	}
	if s.o.Tier == Node {
		if err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, false, nil, nil); err != nil {
			return err
		}
	}
	return p.serviceAccountKey()
}

func (s *starter) etcd() error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	s.etcdURL = fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	p, err := s.run("etcd",
		"--name=default",
		"--data-dir="+filepath.Join(s.c.Dir, "etcd"),
		"--listen-client-urls="+s.etcdURL,
		"--advertise-client-urls="+s.etcdURL,
		"--listen-peer-urls="+peer,
		"--initial-advertise-peer-urls="+peer,
		"--initial-cluster=default="+peer,
		// Test data is disposable; skipping fsync keeps two cores from waiting on the disk.
		"--unsafe-no-fsync",
		"--log-level=warn",
	)
	if err != nil {
		return err
	}
	return s.waitFor(p, "GET /health", s.httpOK(s.etcdURL+"/health"))
}

// httpOK reports whether url answers 200, reached from inside the cluster's network namespace
// when it has one.
func (s *starter) httpOK(url string) func(context.Context) (bool, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	if s.o.NetNS != "" {
		client.Transport = &http.Transport{DialContext: Dial(s.o.NetNS)}
	}
	return func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}
}

func (s *starter) apiserver() error {
	port := s.o.APIServerPort
	if port == 0 {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		port = ports[0]
	}
	s.c.Server = fmt.Sprintf("https://127.0.0.1:%d", port)
	if s.o.Tier == Node {
		// Reachable from the host and from other namespaces, and inside its own.
		s.c.Server = "https://" + net.JoinHostPort(s.o.Node.Net.NSIP.String(), strconv.Itoa(port))
	}
	bind := s.o.BindAddress
	if bind == "" {
		bind = "127.0.0.1"
	}
	advertise, authz, reconciler := "127.0.0.1", "RBAC", "none"
	var kubeletClient []string
	if s.o.Tier == Node {
		// The kubernetes Service must lead pods to the apiserver at the node's address; the
		// kubelet's credential is authorized by the Node authorizer; the apiserver presents its
		// own client certificate to kubelets (logs, exec).
		advertise, authz, reconciler = s.o.Node.Net.NSIP.String(), "Node,RBAC", "lease"
		kubeletClient = []string{"--kubelet-client-certificate=" + s.pki.path("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + s.pki.path("apiserver-kubelet-client.key"),
			"--kubelet-preferred-address-types=InternalIP"}
	}
	pk := s.pki.path
	args := []string{
		"--etcd-servers=" + s.etcdURL,
		"--bind-address=" + bind,
		"--advertise-address=" + advertise,
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(s.c.Dir, "apiserver"),
		"--tls-cert-file=" + pk("apiserver.crt"),
		"--tls-private-key-file=" + pk("apiserver.key"),
		"--client-ca-file=" + pk("ca.crt"),
		"--service-account-key-file=" + pk("sa.key"),
		"--service-account-signing-key-file=" + pk("sa.key"),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-cluster-ip-range=" + serviceCIDR,
		"--authorization-mode=" + authz,
		"--allow-privileged=true",
		// Fewer moving parts on a two-core machine; none of the tests measure fairness.
		"--enable-priority-and-fairness=false",
		"--endpoint-reconciler-type=" + reconciler,
	}
	p, err := s.run("kube-apiserver", append(args, kubeletClient...)...)
	if err != nil {
		return err
	}
	if err := s.writeKubeconfig(); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(s.c.RESTConfig())
	if err != nil {
		return err
	}
	return s.waitFor(p, "GET /readyz", apiserverReady(cs))
}

func (s *starter) writeKubeconfig() error {
	ca, err := os.ReadFile(s.pki.path("ca.crt"))
	if err != nil {
		return err
	}
	crt, err := os.ReadFile(s.pki.path("admin.crt"))
	if err != nil {
		return err
	}
	key, err := os.ReadFile(s.pki.path("admin.key"))
	if err != nil {
		return err
	}
	name := s.c.Name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: s.c.Server, CertificateAuthorityData: ca}
	cfg.AuthInfos[name+"-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name + "-admin"}
	cfg.CurrentContext = name
	s.c.Kubeconfig = filepath.Join(s.c.Dir, "admin.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, s.c.Kubeconfig); err != nil {
		return err
	}
	rc, err := clientcmd.NewDefaultClientConfig(*cfg, nil).ClientConfig()
	if err != nil {
		return err
	}
	rc.QPS, rc.Burst = 100, 200
	if s.o.NetNS != "" {
		rc.Dial = Dial(s.o.NetNS)
	}
	s.c.restConfig = rc
	return nil
}

// Client rates of the simulated cluster's controller manager and scheduler.
const unthrottledQPS, unthrottledBurst = "5000", "10000"

func (s *starter) controllerManager() error {
	p, err := s.run("kube-controller-manager",
		"--kubeconfig="+s.c.Kubeconfig,
		"--service-account-private-key-file="+s.pki.path("sa.key"),
		"--root-ca-file="+s.pki.path("ca.crt"),
		"--service-cluster-ip-range="+serviceCIDR,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=*,-nodeipam,-service-lb-controller,-cloud-node-lifecycle-controller",
		// One machine simulating a cluster: client-side throttling at the default 20 requests
		// per second would make the cluster's own controllers, not the code under test, the
		// slowest part of every rollout (kwokctl's --disable-qps-limits does the same).
		"--kube-api-qps="+unthrottledQPS, "--kube-api-burst="+unthrottledBurst,
	)
	if err != nil {
		return err
	}
	cs, err := s.c.Clientset()
	if err != nil {
		return err
	}
	// The ServiceAccount controller creating "default" in the default namespace shows the
	// controllers are running.
	return s.waitFor(p, "default ServiceAccount created", func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, ignoreNotFound(err)
	})
}

func (s *starter) scheduler() error {
	p, err := s.run("kube-scheduler",
		"--kubeconfig="+s.c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--kube-api-qps="+unthrottledQPS, "--kube-api-burst="+unthrottledBurst,
	)
	if err != nil {
		return err
	}
	// The scheduler has no readiness signal without its serving port; a quick exit (bad flags,
	// no apiserver) is still caught here and by Healthy.
	return s.waitFor(p, "running", func(context.Context) (bool, error) { return true, nil })
}

// kwokAttempts is how often kwok is started before its start counts as failed: kwok 0.8 now and
// then crashes while it sets up its metrics at start (seen once in an e2e run), and starts fine
// the next time.
const kwokAttempts = 2

func (s *starter) kwok() error {
	var err error
	for i := 0; i < kwokAttempts; i++ {
		var p *process
		p, err = s.kwokOnce()
		if err == nil || p == nil {
			return err
		}
		if done, _ := p.exited(); !done {
			return err
		}
		// It crashed: forget the dead process (its log stays, appended to) and start another.
		s.c.procs = s.c.procs[:len(s.c.procs)-1]
	}
	return err
}

// kwokOnce starts kwok and waits for the fake node; it returns the process when it started one.
func (s *starter) kwokOnce() (*process, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	p, err := s.run("kwok",
		"--kubeconfig="+s.c.Kubeconfig,
		"--config="+s.bin(kwokStagesFile),
		"--manage-all-nodes=true",
		"--server-address=127.0.0.1:"+strconv.Itoa(ports[0]),
	)
	if err != nil {
		return nil, err
	}
	cs, err := s.c.Clientset()
	if err != nil {
		return p, err
	}
	node := fakeNode()
	if _, err := cs.CoreV1().Nodes().Create(s.ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return p, fmt.Errorf("creating fake node: %w", err)
	}
	// Schedulable means Ready and rid of the not-ready taint the node lifecycle controller lifts.
	return p, s.waitFor(p, "node "+FakeNodeName+" Ready and untainted", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, FakeNodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, t := range n.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady {
				return false, nil
			}
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func fakeNode() *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("250"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        FakeNodeName,
			Labels:      map[string]string{"kubernetes.io/hostname": FakeNodeName, "kubernetes.io/os": "linux", "type": "kwok"},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// StopAPIServer stops the cluster's apiserver, leaving etcd and the other components running:
// its clients see connections refused until StartAPIServer. Not safe for concurrent use with
// Healthy, Stop or StartAPIServer.
func (c *Cluster) StopAPIServer() error {
	i := c.procIndex("kube-apiserver")
	if i < 0 {
		return fmt.Errorf("cluster %s has no apiserver", c.Name)
	}
	c.procs[i].stop()
	return nil
}

// StartAPIServer starts the apiserver stopped by StopAPIServer again, with the same flags and
// address, and returns once it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	i := c.procIndex("kube-apiserver")
	if i < 0 {
		return fmt.Errorf("cluster %s has no apiserver", c.Name)
	}
	old := c.procs[i]
	if done, _ := old.exited(); !done {
		return fmt.Errorf("cluster %s: the apiserver is running", c.Name)
	}
	p, err := startProcess(old.component, old.cmd.Path, old.cmd.Args[1:], c.LogDir)
	if err != nil {
		return err
	}
	c.procs[i] = p
	cs, err := c.Clientset()
	if err != nil {
		return err
	}
	s := &starter{c: c, o: Options{StartTimeout: DefaultStartTimeout}, ctx: ctx}
	return s.waitFor(p, "GET /readyz", apiserverReady(cs))
}

func (c *Cluster) procIndex(component string) int {
	for i, p := range c.procs {
		if p.component == component {
			return i
		}
	}
	return -1
}

// apiserverReady reports whether the apiserver answers /readyz with ok.
func apiserverReady(cs kubernetes.Interface) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", err
	}
}
