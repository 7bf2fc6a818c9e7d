// Package realnode_test proves the real-node tier: a cluster whose node is a real kubelet with
// containerd, runc, CNI and kube-proxy runs the project's image, pulled from a local registry.
package realnode_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/harness/localserver"
)

func TestRealNode(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "real node")
}

var (
	cluster *localcluster.Cluster
	cs      *kubernetes.Clientset
	// image is the project's image as the node pulls it: ghcr.io, mirrored to the registry.
	image string
)

var _ = BeforeSuite(func(ctx context.Context) {
	bin, err := localcluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	reg, err := localserver.StartOCIRegistryOn(ctx, filepath.Join(dir, "registry"), localserver.BasicAuth{}, "0.0.0.0")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(reg.Close)
	Expect(localcluster.PushSandboxImage(reg.Host, bin)).To(Succeed())
	_, err = localcluster.PushLayout(filepath.Join(bin, "..", "..", "bin", "image"), reg.Host+"/fleetgo/fleet:realnode")
	Expect(err).NotTo(HaveOccurred())
	image = "ghcr.io/fleetgo/fleet:realnode"

	netns, err := localcluster.NewNetNS(fmt.Sprintf("fleet-rn-%d", os.Getpid()), os.Getpid()%200+30)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(netns.Delete)
	_, port, _ := splitHostPort(reg.Host)
	cluster, err = localcluster.Start(ctx, localcluster.Options{Name: "realnode", Tier: localcluster.Node,
		Node: &localcluster.NodeOptions{Net: netns, RegistryPort: port, Mirrors: []string{"ghcr.io"}}})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(cluster.Stop)
	cs, err = cluster.Clientset()
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(10*time.Minute))

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && cluster != nil {
		cluster.WriteLogTails(GinkgoWriter, 60)
	}
})

var _ = It("runs the project's image: `fleet version` in a container pulled from the registry", func(ctx context.Context) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "fleet-version", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "fleet", Image: image, Args: []string{"version"}}},
		},
	}
	_, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		p, err := cs.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p.Status.Phase).To(Equal(corev1.PodSucceeded), "pod status: %+v", p.Status)
	}).WithContext(ctx).WithTimeout(4 * time.Minute).WithPolling(time.Second).Should(Succeed())
	logs, err := cs.CoreV1().Pods("default").GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	Expect(string(logs)).To(MatchRegexp(`^fleet \S+ \(commit [0-9a-f]+, built .* linux/amd64\)`))
}, SpecTimeout(5*time.Minute))

func splitHostPort(hostport string) (string, int, error) {
	var host string
	var port int
	_, err := fmt.Sscanf(hostport, "127.0.0.1:%d", &port)
	host = "127.0.0.1"
	return host, port, err
}
