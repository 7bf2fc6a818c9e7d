// Package realnode_test is the seed walkthrough as a user types it, on clusters whose nodes are
// real (kubelet, containerd, runc, CNI, kube-proxy): the charts from a Helm repository, the
// image from a registry, the controller, agents and gitjob Jobs running as pods.
package realnode_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/harness/localserver"
)

func TestWalkthrough(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(4 * time.Minute)
	SetDefaultEventuallyPollingInterval(time.Second)
	RunSpecs(t, "walkthrough on real nodes")
}

var (
	root, bin, work string
	// mgmt, dev and prod each run in their own network namespace with a real node.
	mgmt, dev, prod *localcluster.Cluster
	mgmtNet         *localcluster.NetNS
	// extra are clusters specs start for themselves.
	extra        []*localcluster.Cluster
	git          *localserver.GitServer
	chartRepoURL string
	// tag is the image tag the packaged charts default to (their appVersion).
	tag string
	// regPort is the registry's port; netBase numbers the suite's network namespaces.
	regPort, netBase int
	// registry is the OCI registry's host:port on the host.
	registry string
)

// sh runs a command as a user would, with KUBECONFIG set and Helm's state in the suite's folder.
func sh(kubeconfig string, name string, args ...string) string {
	GinkgoHelper()
	cmd := exec.Command(filepath.Join(bin, name), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "HELM_CACHE_HOME="+filepath.Join(work, "helm", "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(work, "helm", "config"), "HELM_DATA_HOME="+filepath.Join(work, "helm", "data"))
	out, err := cmd.CombinedOutput()
	fmt.Fprintf(GinkgoWriter, "$ %s %s\n%s", name, strings.Join(args, " "), out)
	Expect(err).NotTo(HaveOccurred(), "%s %s:\n%s", name, strings.Join(args, " "), out)
	return string(out)
}

// chartsAppVersion reads the appVersion `make charts` stamped into the Helm repository.
func chartsAppVersion(dir string) string {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(dir, "index.yaml"))
	Expect(err).NotTo(HaveOccurred(), "bin/charts: run make charts")
	var idx struct {
		Entries map[string][]struct {
			AppVersion string `json:"appVersion"`
		} `json:"entries"`
	}
	Expect(yaml.Unmarshal(data, &idx)).To(Succeed())
	Expect(idx.Entries["fleet"]).NotTo(BeEmpty())
	return idx.Entries["fleet"][0].AppVersion
}

var _ = BeforeSuite(func(ctx context.Context) {
	var err error
	root, err = testenv.RepoRoot()
	Expect(err).NotTo(HaveOccurred())
	bin, err = localcluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	work = GinkgoT().TempDir()
	chartsDir := filepath.Join(root, "bin", "charts")
	tag = chartsAppVersion(chartsDir)

	// Three namespaces; the host reaches each at its NSIP, and pods of any reach the host's
	// servers at mgmtNet.HostIP.
	netBase = os.Getpid()%60*4 + 10
	var nets []*localcluster.NetNS
	for i, name := range []string{"mgmt", "dev", "prod"} {
		nets = append(nets, newNet(name, i))
	}
	mgmtNet = nets[0]

	// The image, pushed as `make image-push` pushes it, and the sandbox image.
	reg, err := localserver.StartOCIRegistryOn(ctx, filepath.Join(work, "registry"), localserver.BasicAuth{}, "0.0.0.0")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(reg.Close)
	registry = reg.Host
	Expect(localcluster.PushSandboxImage(reg.Host, bin)).To(Succeed())
	_, err = localcluster.PushLayout(filepath.Join(root, "bin", "image"), reg.Host+"/fleetgo/fleet:"+tag)
	Expect(err).NotTo(HaveOccurred())
	_, port, err := net.SplitHostPort(reg.Host)
	Expect(err).NotTo(HaveOccurred())
	regPort, _ = strconv.Atoi(port)

	// The Helm repository `make charts` wrote, and the git server, where pods reach them.
	l, err := net.Listen("tcp", net.JoinHostPort(mgmtNet.HostIP.String(), "0"))
	Expect(err).NotTo(HaveOccurred())
	repo := httptest.NewUnstartedServer(http.FileServer(http.Dir(chartsDir)))
	repo.Listener.Close()
	repo.Listener = l
	repo.Start()
	DeferCleanup(repo.Close)
	chartRepoURL = repo.URL
	git, err = localserver.StartGitServerOn(filepath.Join(work, "git"), localserver.BasicAuth{}, mgmtNet.HostIP)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(git.Close)

	var opts []localcluster.Options
	for i, name := range []string{"wt-mgmt", "wt-dev", "wt-prod"} {
		opts = append(opts, nodeOptions(name, nets[i]))
	}
	clusters, err := localcluster.StartAll(ctx, opts...)
	Expect(err).NotTo(HaveOccurred())
	for _, c := range clusters {
		DeferCleanup(c.Stop)
	}
	mgmt, dev, prod = clusters[0], clusters[1], clusters[2]
}, NodeTimeout(12*time.Minute))

// newNet creates the suite's i-th network namespace.
func newNet(name string, i int) *localcluster.NetNS {
	GinkgoHelper()
	ns, err := localcluster.NewNetNS(fmt.Sprintf("fleet-wt-%s-%d", name, os.Getpid()), netBase+i)
	Expect(err).NotTo(HaveOccurred(), "creating a network namespace (needs root)")
	DeferCleanup(ns.Delete)
	return ns
}

// nodeOptions describe a real-node cluster that pulls ghcr.io images from the suite's registry.
func nodeOptions(name string, net *localcluster.NetNS) localcluster.Options {
	return localcluster.Options{Name: name, Tier: localcluster.Node,
		Node: &localcluster.NodeOptions{Net: net, RegistryPort: regPort, Mirrors: []string{"ghcr.io"}}}
}

var _ = ReportAfterEach(func(r SpecReport) {
	if !r.Failed() {
		return
	}
	for _, c := range append([]*localcluster.Cluster{mgmt, dev, prod}, extra...) {
		if c == nil {
			continue
		}
		fmt.Fprintf(GinkgoWriter, "----- pods of %s -----\n", c.Name)
		out, _ := exec.Command(filepath.Join(bin, "kubectl"), "--kubeconfig", c.Kubeconfig, "get", "pods", "-A", "-o", "wide").CombinedOutput()
		fmt.Fprintln(GinkgoWriter, string(out))
		cs, err := c.Clientset()
		if err != nil {
			continue
		}
		pods, _ := cs.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
		for _, p := range pods.Items {
			logs, _ := cs.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](30)}).DoRaw(context.Background())
			fmt.Fprintf(GinkgoWriter, "----- %s: pod %s/%s -----\n%s\n", c.Name, p.Namespace, p.Name, logs)
		}
		c.WriteLogTails(GinkgoWriter, 30)
	}
})

func clientset(c *localcluster.Cluster) *kubernetes.Clientset {
	GinkgoHelper()
	cs, err := c.Clientset()
	Expect(err).NotTo(HaveOccurred())
	return cs
}
