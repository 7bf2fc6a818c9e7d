package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// The real-node tier: a kubelet, containerd with runc, CNI bridge networking and kube-proxy,
// all inside the cluster's network namespace, so each cluster's Service rules, bridge and pod
// addresses are its own. The node's processes stay in the host's mount namespace (they are
// started through nsenter, which joins only the network namespace): the kubelet's volume
// mounts must be seen by containerd and runc.

const (
	// SandboxImage is the pod sandbox image containerd is configured with; NodeOptions.Registry
	// serves it (see PushSandboxImage) under the registry.k8s.io mirror.
	SandboxImage = "registry.k8s.io/pause:3.10"
	// podCIDR is the range the node's CNI bridge hands pod addresses from. Every cluster may use
	// the same one: clusters share no network, and traffic leaving a node is masqueraded.
	podCIDR = "10.244.0.0/24"
	// kubeletPort is the kubelet's serving port on the node address.
	kubeletPort = 10250
	// runcBinary is Debian's runc.
	runcBinary = "/usr/sbin/runc"
	// nodeStopGrace bounds how long pods get to end when a real-node cluster stops.
	nodeStopGrace = 30 * time.Second
)

// NodeOptions configure the real node of a Node-tier cluster.
type NodeOptions struct {
	// Net is the network namespace the whole cluster runs in (see NewNetNS); the node's address
	// is Net.NSIP and the host is reached at Net.HostIP.
	Net *NetNS
	// RegistryPort is the port of an OCI registry (plain HTTP) listening on the host's every
	// address: containerd pulls from it at Net.HostIP:RegistryPort.
	RegistryPort int
	// Mirrors are the registry host names whose images are pulled from that registry instead,
	// so charts keep their image names; registry.k8s.io (the sandbox image) is always mirrored.
	Mirrors []string
}

// NodeName is the name of a Node-tier cluster's node.
func NodeName(cluster string) string { return cluster + "-node" }

// nodeStarter holds the paths and addresses of one real node.
type nodeStarter struct {
	*starter
	no      NodeOptions
	dir     string
	nodeIP  string
	cgroups string // the node's cgroup root, below every hierarchy's root
}

func (s *starter) node() error {
	no := s.o.Node
	if no == nil || no.Net == nil {
		return fmt.Errorf("the node tier needs Options.Node with a network namespace")
	}
	n := &nodeStarter{starter: s, no: *no, dir: filepath.Join(s.c.Dir, "node"), nodeIP: no.Net.NSIP.String(),
		cgroups: "/localcluster-" + s.c.Name}
	s.c.node = n
	for _, step := range []func() error{n.network, n.certificates, n.makeCgroups, n.containerd, n.kubelet, n.kubeProxy, n.waitReady} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// network gives the namespace a default route through the host, so pods reach the host's
// servers and other clusters, and lets the host forward between namespaces.
func (n *nodeStarter) network() error {
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enabling IP forwarding: %w", err)
	}
	if out, err := n.no.Net.Command("ip", "route", "replace", "default", "via", n.no.Net.HostIP.String()).CombinedOutput(); err != nil {
		return fmt.Errorf("default route in %s: %v: %s", n.no.Net.Name, err, out)
	}
	return nil
}

// certificates issues the kubelet's client and serving certificates and its kubeconfig, and
// the apiserver's client certificate for the kubelet (logs, exec).
func (n *nodeStarter) certificates() error {
	name := NodeName(n.c.Name)
	if err := n.pki.issue("kubelet", "system:node:"+name, []string{"system:nodes"}, false, nil, nil); err != nil {
		return err
	}
	if err := n.pki.issue("kubelet-serving", name, nil, true, []net.IP{n.no.Net.NSIP}, []string{name}); err != nil {
		return err
	}
	return n.writeKubeconfigFor("kubelet", filepath.Join(n.dir, "kubelet.kubeconfig"))
}

func (n *nodeStarter) writeKubeconfigFor(certName, path string) error {
	ca, err := os.ReadFile(n.pki.path("ca.crt"))
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: n.c.Server, CertificateAuthorityData: ca}
	cfg.AuthInfos["local"] = &clientcmdapi.AuthInfo{ClientCertificate: n.pki.path(certName + ".crt"), ClientKey: n.pki.path(certName + ".key")}
	cfg.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "local"}
	cfg.CurrentContext = "local"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*cfg, path)
}

// runNode starts a node component inside the network namespace but in the host's mount
// namespace.
func (n *nodeStarter) runNode(component string, args ...string) (*process, error) {
	args = append([]string{"--net=" + filepath.Join("/var/run/netns", n.no.Net.Name), "--", n.bin(binaryFor[component])}, args...)
	p, err := startProcess(component, "/usr/bin/nsenter", args, n.c.LogDir)
	if err != nil {
		return nil, err
	}
	n.c.procs = append(n.c.procs, p)
	return p, nil
}

func (n *nodeStarter) containerd() error {
	cd := filepath.Join(n.dir, "containerd")
	for _, d := range []string{filepath.Join(cd, "certs.d"), filepath.Join(n.dir, "cni")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	mirror := net.JoinHostPort(n.no.Net.HostIP.String(), strconv.Itoa(n.no.RegistryPort))
	for _, host := range append([]string{"registry.k8s.io"}, n.no.Mirrors...) {
		if err := writeFile(filepath.Join(cd, "certs.d", host, "hosts.toml"), hostsTOML(host, mirror)); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(n.dir, "cni", "10-bridge.conflist"), cniConfig(filepath.Join(n.dir, "cni-ipam"))); err != nil {
		return err
	}
	cfg := filepath.Join(cd, "config.toml")
	if err := writeFile(cfg, containerdConfig(cd, filepath.Join(n.o.BinDir, "cni"), filepath.Join(n.dir, "cni"))); err != nil {
		return err
	}
	p, err := n.runNode("containerd", "--config", cfg)
	if err != nil {
		return err
	}
	sock := filepath.Join(cd, "containerd.sock")
	return n.waitFor(p, "socket "+sock, func(context.Context) (bool, error) {
		_, err := os.Stat(sock)
		return err == nil, nil
	})
}

func (n *nodeStarter) kubelet() error {
	cfg := filepath.Join(n.dir, "kubelet.yaml")
	if err := writeFile(cfg, n.kubeletConfig()); err != nil {
		return err
	}
	_, err := n.runNode("kubelet",
		"--config="+cfg,
		"--kubeconfig="+filepath.Join(n.dir, "kubelet.kubeconfig"),
		"--root-dir="+filepath.Join(n.dir, "kubelet"),
		"--cert-dir="+filepath.Join(n.dir, "kubelet-pki"),
		"--hostname-override="+NodeName(n.c.Name),
		"--node-ip="+n.nodeIP,
		"--v=1",
	)
	return err
}

func (n *nodeStarter) kubeProxy() error {
	cfg := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := writeFile(cfg, fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %s
hostnameOverride: %s
mode: iptables
clusterCIDR: %s
# The namespace cannot change the host's conntrack table size; leave it as it is.
conntrack:
  maxPerCore: 0
metricsBindAddress: 127.0.0.1:10249
healthzBindAddress: 127.0.0.1:10256
`, n.c.Kubeconfig, NodeName(n.c.Name), podCIDR)); err != nil {
		return err
	}
	p, err := n.runNode("kube-proxy", "--config="+cfg)
	if err != nil {
		return err
	}
	return n.waitFor(p, "GET /healthz", n.httpOK("http://127.0.0.1:10256/healthz"))
}

// waitReady waits for the node to be Ready (runtime and network up) and schedulable.
func (n *nodeStarter) waitReady() error {
	cs, err := n.c.Clientset()
	if err != nil {
		return err
	}
	p := n.c.procs[n.c.procIndex("kubelet")]
	name := NodeName(n.c.Name)
	return n.waitFor(p, "node "+name+" Ready", func(ctx context.Context) (bool, error) {
		node, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, ignoreNotFound(err)
		}
		for _, t := range node.Spec.Taints {
			if t.Key == corev1.TaintNodeNotReady {
				return false, nil
			}
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				if c.Status == corev1.ConditionTrue {
					return true, nil
				}
				return false, fmt.Errorf("node not ready: %s", c.Message)
			}
		}
		return false, nil
	})
}

func (n *nodeStarter) kubeletConfig() string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# This machine has cgroup v1 (hybrid); Kubernetes 1.35+ refuses it unless told otherwise.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
containerRuntimeEndpoint: unix://%s
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
failSwapOn: false
resolvConf: /etc/resolv.conf
clusterDomain: cluster.local
# A shared test machine: evict only when it is really full, and never collect images.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 110
podLogsDir: %s
`, n.cgroups, filepath.Join(n.dir, "containerd", "containerd.sock"), n.nodeIP, kubeletPort,
		n.pki.path("kubelet-serving.crt"), n.pki.path("kubelet-serving.key"), n.pki.path("ca.crt"),
		filepath.Join(n.dir, "pod-logs"))
}

func containerdConfig(dir, cniBin, cniConf string) string {
	return fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q

[grpc]
  address = %[3]q

[ttrpc]
  address = %[4]q

[plugins."io.containerd.internal.v1.opt"]
  path = %[5]q

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[6]q
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %[7]q

[plugins."io.containerd.cri.v1.runtime"]
  # This machine withholds CAP_SYS_RESOURCE even from root: an OOM score below containerd's
  # own (the sandbox's -998) cannot be set, so scores are kept at or above it.
  restrict_oom_score_adj = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %[8]q
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[9]q]
    conf_dir = %[10]q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), filepath.Join(dir, "containerd.sock"),
		filepath.Join(dir, "containerd.sock.ttrpc"), filepath.Join(dir, "opt"), SandboxImage,
		filepath.Join(dir, "certs.d"), runcBinary, cniBin, cniConf)
}

// hostsTOML sends pulls for host to the plain-HTTP mirror.
func hostsTOML(host, mirror string) string {
	return fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "https://"+host, "http://"+mirror)
}

func cniConfig(ipamDir string) string {
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "localcluster",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, ipamDir, podCIDR)
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// cgroupHierarchies lists the mounted cgroup v1 hierarchies (and the unified one).
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return out, nil
}

// makeCgroups creates the node's cgroup root in every hierarchy (the kubelet requires it to
// exist); a new cpuset cgroup gets its parent's CPUs and memory nodes.
func (n *nodeStarter) makeCgroups() error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		d := filepath.Join(h, n.cgroups)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
		if strings.HasSuffix(h, "/cpuset") {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(d, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", d, err)
				}
			}
		}
	}
	return nil
}
