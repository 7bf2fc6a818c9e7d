package controller_test

import (
	"context"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/controller"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A replica standing by fills its caches before it leads, so that a fail-over lists nothing:
// the apiserver serves every watch the leader needs while another replica holds the Lease, and
// the take-over opens none. What reached the caches while standing by is handled once leading.
var _ = Describe("a replica standing by for the Lease", func() {
	It("watches everything it will read before it leads, opens no watch when it takes over, and then handles what it cached meanwhile", func(ctx context.Context) {
		c, api, err := testenv.StartWithCRDs(ctx, "standby")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(c.Stop)
		k, err := c.Clientset()
		Expect(err).NotTo(HaveOccurred())
		const system = "cattle-fleet-system"
		// Another replica leads (this test holds the Lease for it).
		now := metav1.NewMicroTime(time.Now())
		_, err = k.CoordinationV1().Leases(system).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "fleet-controller-lock"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("another-replica"), LeaseDurationSeconds: ptr.To[int32](3600),
				AcquireTime: &now, RenewTime: &now}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		before := watches(ctx, k)

		health := freeAddr()
		stop := testenv.RunController(c.RESTConfig(), config.Config{}, controller.Options{LeaderElect: true, HealthAddr: health})
		DeferCleanup(func() { Expect(stop()).To(Succeed()) })
		var standingBy map[string]int
		Eventually(func(g Gomega) {
			standingBy = opened(before, watches(ctx, k))
			for _, r := range []string{"bundledeployments", "bundles", "clusters", "clustergroups", "gitrepos", "secrets", "namespaces", "clusterregistrations"} {
				g.Expect(standingBy).To(HaveKeyWithValue(r, 1), "the standby watches %s", r)
			}
		}).Should(Succeed())

		// While standing by it handles nothing.
		const ns = "standby-ws"
		_, err = k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns, Labels: map[string]string{"env": "warm"}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = api.ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "warm", Namespace: ns},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "warm"}}}})
		Expect(err).NotTo(HaveOccurred())
		Consistently(func(g Gomega) {
			code, _ := get("http://" + health + "/readyz")
			g.Expect(code).NotTo(Equal(http.StatusOK))
			cg, err := api.ClusterGroup().Get(ns, "warm", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cg.Status.ClusterCount).To(BeZero())
		}, "3s").Should(Succeed())

		// The other replica gives the Lease back.
		l, err := k.CoordinationV1().Leases(system).Get(ctx, "fleet-controller-lock", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		l.Spec.HolderIdentity = ptr.To("")
		_, err = k.CoordinationV1().Leases(system).Update(ctx, l, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() int { code, _ := get("http://" + health + "/readyz"); return code }, time.Minute).Should(Equal(http.StatusOK))
		Eventually(func(g Gomega) {
			cg, err := api.ClusterGroup().Get(ns, "warm", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cg.Status.ClusterCount).To(Equal(1), "the group it cached while standing by counts its cluster")
		}).Should(Succeed())
		Expect(opened(before, watches(ctx, k))).To(Equal(standingBy), "leading opened no watch the standby had not")
	})
})

// watchLine is one of the apiserver's gauges of long-running requests, resourceLabel its resource.
var (
	watchLine     = regexp.MustCompile(`^apiserver_longrunning_requests\{([^}]*)\} (\d+)`)
	resourceLabel = regexp.MustCompile(`resource="([^"]*)"`)
)

// watches are the watches the apiserver serves, by resource.
func watches(ctx context.Context, k kubernetes.Interface) map[string]int {
	raw, err := k.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	Expect(err).NotTo(HaveOccurred())
	n := map[string]int{}
	for _, line := range strings.Split(string(raw), "\n") {
		m := watchLine.FindStringSubmatch(line)
		if m == nil || !strings.Contains(m[1], `verb="WATCH"`) {
			continue
		}
		r := resourceLabel.FindStringSubmatch(m[1])
		v, _ := strconv.Atoi(m[2])
		if r != nil && v > 0 {
			n[r[1]] += v
		}
	}
	return n
}

// opened are the watches of after that before did not have.
func opened(before, after map[string]int) map[string]int {
	d := map[string]int{}
	for r, v := range after {
		if v > before[r] {
			d[r] = v - before[r]
		}
	}
	return d
}
