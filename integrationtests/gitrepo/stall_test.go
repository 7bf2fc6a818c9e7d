package gitrepo_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/fleetgo/fleet/internal/harness/localserver"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("a stalled chart server", func() {
	It("holds a GitRepo's run no longer than its deadline; the GitRepo says where it waited and others go on", func(ctx context.Context) {
		// A chart repository that accepts connections and never answers.
		srv, err := localserver.StartStalledServer()
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(srv.Close)
		stalled := srv.URL
		publish("stalled", "main", map[string]string{"app/fleet.yaml": "helm:\n  repo: " + stalled + "\n  chart: app\n  version: 1.0.0\n"})
		newGitRepo("stalled", "stalled", nil)
		Eventually(func(g Gomega) {
			c := fleet.FindCondition(gitRepo("stalled").Status.Conditions, fleet.ConditionStalled)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring("did not finish within " + runTimeout.String()))
			g.Expect(c.Message).To(ContainSubstring(stalled))
		}, runTimeout+time.Minute).Should(Succeed())

		commit := publish("after-stall", "main", map[string]string{"app/cm.yaml": configMap("app", "1")})
		newGitRepo("after-stall", "after-stall", nil)
		Eventually(func() map[string]string { return bundlesOf("after-stall") }).Should(Equal(map[string]string{"after-stall-app": commit}))
	})
})
