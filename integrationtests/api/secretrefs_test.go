package api_test

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// tenantOf is a ServiceAccount of ns, with its own token, that may write Fleet's kinds in ns and
// get only the Secrets readable names.
func tenantOf(ctx context.Context, ns string, readable ...string) fleetcontrollers.Interface {
	rules := []rbacv1.PolicyRule{{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"gitrepos", "helmops", "imagescans", "bundles"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}
	if len(readable) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: readable, Verbs: []string{"get"}})
	}
	return identityOf(ctx, ns, "tenant", rules)
}

// identityOf is ServiceAccount name of ns, with its own token, holding rules in ns.
func identityOf(ctx context.Context, ns, name string, rules []rbacv1.PolicyRule) fleetcontrollers.Interface {
	f, err := fleetfactory.NewFactoryFromConfig(identityConfig(ctx, ns, name, rules))
	Expect(err).NotTo(HaveOccurred())
	return f.Fleet().V1alpha1()
}

// identityConfig is the client configuration of ServiceAccount name of ns, with its own token,
// holding rules in ns.
func identityConfig(ctx context.Context, ns, name string, rules []rbacv1.PolicyRule) *rest.Config {
	cs, err := cluster.Clientset()
	Expect(err).NotTo(HaveOccurred())
	cfg, err := testenv.Identity(ctx, cs, cluster.RESTConfig(), ns, name, rules)
	Expect(err).NotTo(HaveOccurred())
	return cfg
}

var _ = Describe("Secrets a GitRepo, HelmOp, ImageScan or Bundle names", func() {
	It("must be ones their writer may read: a tenant cannot name another team's Secret for the manager to send on", func(ctx context.Context) {
		ns := newNamespace(ctx)
		tenant := tenantOf(ctx, ns, "mine")
		refused := func(err error, field string) {
			GinkgoHelper()
			Expect(err).To(HaveOccurred())
			Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
			Expect(err.Error()).To(And(ContainSubstring(field+": secret "+ns+"/team-b"), ContainSubstring("may not get it")))
		}
		meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Namespace: ns} }

		_, err := tenant.GitRepo().Create(&fleet.GitRepo{ObjectMeta: meta("borrowed"), Spec: fleet.GitRepoSpec{Repo: "https://git.example/x", ClientSecretName: "team-b"}})
		refused(err, "spec.clientSecretName")
		_, err = tenant.GitRepo().Create(&fleet.GitRepo{ObjectMeta: meta("charts"), Spec: fleet.GitRepoSpec{Repo: "https://git.example/x", HelmSecretNameForPaths: "team-b"}})
		refused(err, "spec.helmSecretNameForPaths")
		_, err = tenant.HelmOp().Create(&fleet.HelmOp{ObjectMeta: meta("db"), Spec: fleet.HelmOpSpec{HelmSecretName: "team-b",
			BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "db", Repo: "https://charts.example"}}}}})
		refused(err, "spec.helmSecretName")
		_, err = tenant.ImageScan().Create(&fleet.ImageScan{ObjectMeta: meta("scan"), Spec: fleet.ImageScanSpec{TagName: "t", GitRepoName: "mine",
			Image: "registry.example/app", Policy: fleet.ImageScanPolicy{SemVer: &fleet.SemVerPolicy{Range: "*"}}, SecretRef: &corev1.LocalObjectReference{Name: "team-b"}}})
		refused(err, "spec.secretRef.name")
		_, err = tenant.Bundle().Create(&fleet.Bundle{ObjectMeta: meta("direct"), Spec: fleet.BundleSpec{HelmOpOptions: &fleet.BundleHelmOptions{SecretName: "team-b"}}})
		refused(err, "spec.helmOpOptions.helmOpSecretName")

		// A Secret the tenant may read is theirs to name.
		_, err = tenant.GitRepo().Create(&fleet.GitRepo{ObjectMeta: meta("own"), Spec: fleet.GitRepoSpec{Repo: "https://git.example/x", ClientSecretName: "mine"}})
		Expect(err).NotTo(HaveOccurred())
		// Nor can they switch to another's later.
		gr, err := tenant.GitRepo().Get(ns, "own", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		gr.Spec.ClientSecretName = "team-b"
		_, err = tenant.GitRepo().Update(gr)
		refused(err, "spec.clientSecretName")

		// What an administrator set up stays theirs: the tenant may change the rest (pause it),
		// not name it anew.
		_, err = clients.GitRepo().Create(&fleet.GitRepo{ObjectMeta: meta("team-b-repo"), Spec: fleet.GitRepoSpec{Repo: "https://git.example/b", ClientSecretName: "team-b"}})
		Expect(err).NotTo(HaveOccurred())
		gr, err = tenant.GitRepo().Get(ns, "team-b-repo", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		gr.Spec.Paused = true
		gr, err = tenant.GitRepo().Update(gr)
		Expect(err).NotTo(HaveOccurred())
		// ... but not send it elsewhere: another repository, or charts of other hosts.
		moved := func(err error, field string) {
			GinkgoHelper()
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(And(ContainSubstring(field+": secret "+ns+"/team-b"), ContainSubstring("may not change where it is sent")))
		}
		repo := gr.DeepCopy()
		repo.Spec.Repo = "https://attacker.example/x"
		_, err = tenant.GitRepo().Update(repo)
		moved(err, "spec.clientSecretName")
		_, err = clients.GitRepo().Create(&fleet.GitRepo{ObjectMeta: meta("team-b-charts"), Spec: fleet.GitRepoSpec{Repo: "https://git.example/b",
			HelmSecretName: "team-b", HelmRepoURLRegex: "^https://charts\\.example/"}})
		Expect(err).NotTo(HaveOccurred())
		charts, err := tenant.GitRepo().Get(ns, "team-b-charts", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		charts.Spec.HelmRepoURLRegex = ".*"
		_, err = tenant.GitRepo().Update(charts)
		moved(err, "spec.helmSecretName")
		_, err = clients.HelmOp().Create(&fleet.HelmOp{ObjectMeta: meta("team-b-db"), Spec: fleet.HelmOpSpec{HelmSecretName: "team-b",
			BundleSpec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "db", Repo: "https://charts.example"}}}}})
		Expect(err).NotTo(HaveOccurred())
		op, err := tenant.HelmOp().Get(ns, "team-b-db", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		op.Spec.Helm.Repo = "https://attacker.example"
		_, err = tenant.HelmOp().Update(op)
		moved(err, "spec.helmSecretName")
		op.Spec.Helm.Repo = "https://charts.example"
		op.Spec.Paused = true
		_, err = tenant.HelmOp().Update(op)
		Expect(err).NotTo(HaveOccurred(), "a write that keeps where it is sent passes")
	})
})
