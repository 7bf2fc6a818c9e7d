package api_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/controller/gitrepo"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("A Bundle, ImageScan or Rollout claiming a GitRepo or HelmOp", func() {
	It("is written only by that owner or the GitRepo's Job: a tenant with Bundle rights cannot pass its Bundle off as another team's", func(ctx context.Context) {
		ns := newNamespace(ctx)
		meta := func(name string, lbl map[string]string) metav1.ObjectMeta {
			return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbl}
		}
		_, err := clients.GitRepo().Create(&fleet.GitRepo{ObjectMeta: meta("team-a", nil), Spec: fleet.GitRepoSpec{Repo: "https://git.example/a"}})
		Expect(err).NotTo(HaveOccurred())
		// The tenant may write Bundles, ImageScans and Rollouts and read GitRepos and HelmOps.
		tenant := identityOf(ctx, ns, "bundler", []rbacv1.PolicyRule{
			{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"bundles", "imagescans", "rollouts"}, Verbs: []string{"get", "create", "update"}},
			{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"gitrepos", "helmops"}, Verbs: []string{"get", "list", "watch"}}})
		refused := func(err error, claim, owner string) {
			GinkgoHelper()
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(And(ContainSubstring(claim+": "+owner), ContainSubstring("may not claim it")))
		}

		_, err = tenant.Bundle().Create(&fleet.Bundle{ObjectMeta: meta("spoof", map[string]string{fleet.RepoLabel: "team-a"})})
		refused(err, "label "+fleet.RepoLabel, "gitrepos "+ns+"/team-a")
		_, err = tenant.Bundle().Create(&fleet.Bundle{ObjectMeta: meta("spoof-op", map[string]string{fleet.HelmNameLabel: "db"})})
		refused(err, "label "+fleet.HelmNameLabel, "helmops "+ns+"/db")
		_, err = tenant.Rollout().Create(&fleet.Rollout{ObjectMeta: meta("spoof", map[string]string{fleet.RepoLabel: "team-a"})})
		refused(err, "label "+fleet.RepoLabel, "gitrepos "+ns+"/team-a")
		_, err = tenant.ImageScan().Create(&fleet.ImageScan{ObjectMeta: meta("scan", nil), Spec: fleet.ImageScanSpec{TagName: "t", GitRepoName: "team-a",
			Image: "registry.example/app", Policy: fleet.ImageScanPolicy{SemVer: &fleet.SemVerPolicy{Range: "*"}}}})
		refused(err, "spec.gitrepoName", "gitrepos "+ns+"/team-a")

		// Nor by relabelling a Bundle of its own.
		own, err := tenant.Bundle().Create(&fleet.Bundle{ObjectMeta: meta("own", nil)})
		Expect(err).NotTo(HaveOccurred())
		own.Labels = map[string]string{fleet.RepoLabel: "team-a"}
		_, err = tenant.Bundle().Update(own)
		refused(err, "label "+fleet.RepoLabel, "gitrepos "+ns+"/team-a")

		// The GitRepo's Job (its Role as the manager writes it) publishes for its own GitRepo, and
		// for no other.
		job := identityOf(ctx, ns, "git-team-a", gitrepo.JobRules("team-a"))
		_, err = job.Bundle().Create(&fleet.Bundle{ObjectMeta: meta("team-a-app", map[string]string{fleet.RepoLabel: "team-a"})})
		Expect(err).NotTo(HaveOccurred())
		_, err = job.ImageScan().Create(&fleet.ImageScan{ObjectMeta: meta("team-a-scan", nil), Spec: fleet.ImageScanSpec{TagName: "t", GitRepoName: "team-a",
			Image: "registry.example/app", Policy: fleet.ImageScanPolicy{SemVer: &fleet.SemVerPolicy{Range: "*"}}}})
		Expect(err).NotTo(HaveOccurred())
		_, err = job.Bundle().Create(&fleet.Bundle{ObjectMeta: meta("team-b-app", map[string]string{fleet.RepoLabel: "team-b"})})
		refused(err, "label "+fleet.RepoLabel, "gitrepos "+ns+"/team-b")

		// A tenant's write that keeps the claim it found (a Bundle the Job wrote) is not one.
		b, err := tenant.Bundle().Get(ns, "team-a-app", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		b.Spec.Paused = true
		_, err = tenant.Bundle().Update(b)
		Expect(err).NotTo(HaveOccurred())
	})
})
