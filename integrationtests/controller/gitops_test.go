package controller_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/controller"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// The chart's gitops.enabled=false (fleet controller --gitops=false): GitRepos are left alone,
// the other controllers run.
var _ = It("with --gitops=false leaves GitRepos alone while the other controllers run", func(ctx context.Context) {
	other, otherAPI, err := testenv.StartWithCRDs(ctx, "nogitops")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(other.Stop)
	stop := testenv.RunController(other.RESTConfig(), *inForce.Get(), controller.Options{DisableGitOps: true})
	DeferCleanup(func() { Expect(stop()).To(Succeed()) })

	gitRepo := func() *fleet.GitRepo {
		return &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "left-alone", Namespace: fleet.DefaultNamespace},
			Spec: fleet.GitRepoSpec{Repo: "https://git.invalid/repo", Branch: "main"}}
	}
	for _, a := range []fleetcontrollers.Interface{api, otherAPI} {
		Eventually(func() error { _, err := a.GitRepo().Create(gitRepo()); return err }).Should(Succeed())
	}
	// With GitOps on (the suite's controller), the GitRepo gets a status.
	Eventually(func(g Gomega) {
		gr, err := api.GitRepo().Get(fleet.DefaultNamespace, "left-alone", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(gr.Status.Conditions).NotTo(BeEmpty())
	}).Should(Succeed())

	// With it off, a ClusterGroup created after the GitRepo is handled, and the GitRepo is not.
	_, err = otherAPI.ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: fleet.DefaultNamespace}})
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		cg, err := otherAPI.ClusterGroup().Get(fleet.DefaultNamespace, "probe", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		c := fleet.FindCondition(cg.Status.Conditions, fleet.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
	}).Should(Succeed())
	gr, err := otherAPI.GitRepo().Get(fleet.DefaultNamespace, "left-alone", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	Expect(gr.Status.Conditions).To(BeEmpty())
	Expect(gr.Finalizers).To(BeEmpty())
})
