package gitrepo_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	gogit "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func imageScan(name string) fleet.ImageScanStatus {
	s, err := api.ImageScan().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	return s.Status
}

// bundleContent joins the resources of a Bundle of fleet-default.
func bundleContent(name string) string {
	b, err := api.Bundle().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	var all strings.Builder
	for _, r := range b.Spec.Resources {
		all.WriteString(r.Content)
	}
	return all.String()
}

var _ = Describe("ImageScans", func() {
	It("commit the newest tag in range to the GitRepo's repository, which then deploys", func(ctx context.Context) {
		reg, err := localserver.StartOCIRegistry(ctx, GinkgoT().TempDir(), localserver.BasicAuth{Username: "scan", Password: "scan-pass"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(reg.Close)
		push := func(tag string) {
			img, err := random.Image(64, 1)
			Expect(err).NotTo(HaveOccurred())
			ref, err := name.ParseReference(reg.Host + "/team/web:" + tag)
			Expect(err).NotTo(HaveOccurred())
			Expect(remote.Write(ref, img, remote.WithAuth(&authn.Basic{Username: "scan", Password: "scan-pass"}))).To(Succeed())
		}
		push("0.9.0")
		push("1.0.0")
		push("2.0.0")
		image := reg.Host + "/team/web"
		dockerConfig := func(password string) []byte {
			auth := base64.StdEncoding.EncodeToString([]byte("scan:" + password))
			return []byte(fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.Host, auth))
		}
		for secret, password := range map[string]string{"registry": "scan-pass", "registry-wrong": "nope"} {
			_, err = kube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: fleet.DefaultNamespace}, Type: corev1.SecretTypeDockerConfigJson,
				Data: map[string][]byte{corev1.DockerConfigJsonKey: dockerConfig(password)}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		first := publish("scanned", "main", map[string]string{"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n" +
			"  image: " + image + ":0.9.0 # {\"$imagescan\": \"web\"}\n" +
			"  tag: 0.9.0 # {\"$imagescan\": \"web:tag\"}\n"})
		newGitRepo("scanned", "scanned", func(s *fleet.GitRepoSpec) {
			s.ImageScanCommit = fleet.CommitSpec{AuthorName: "Scanner", AuthorEmail: "scanner@example.com", MessageTemplate: "bump {{.Image}} to {{.Tag}}"}
		})
		Eventually(func() map[string]string { return bundlesOf("scanned") }).Should(Equal(map[string]string{"scanned-app": first}))

		newScan := func(name, secret string) {
			_, err := api.ImageScan().Create(&fleet.ImageScan{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace},
				Spec: fleet.ImageScanSpec{Image: image, TagName: "web", GitRepoName: "scanned", Interval: metav1.Duration{Duration: 2 * time.Second},
					SecretRef: &corev1.LocalObjectReference{Name: secret}, Policy: fleet.ImageScanPolicy{SemVer: &fleet.SemVerPolicy{Range: "<2.0.0"}}}})
			Expect(err).NotTo(HaveOccurred())
		}
		newScan("web", "registry")
		Eventually(func(g Gomega) {
			st := imageScan("web")
			g.Expect(st.LatestTag).To(Equal("1.0.0"))
			g.Expect(st.LatestImage).To(Equal(image + ":1.0.0"))
			g.Expect(st.LatestDigest).To(HavePrefix("sha256:"))
			g.Expect(st.LastScanTime.IsZero()).To(BeFalse())
			c := fleet.FindCondition(st.Conditions, "Ready")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionTrue), c.Message)
		}).Should(Succeed())
		// The commit reaches the repository, the GitRepo picks it up and the Bundle has the tag.
		Eventually(func() string { return bundleContent("scanned-app") }, 60*time.Second).Should(And(
			ContainSubstring(image+":1.0.0 # {\"$imagescan\": \"web\"}"), ContainSubstring("tag: 1.0.0 #")))
		Expect(bundlesOf("scanned")["scanned-app"]).NotTo(Equal(first))
		dir := GinkgoT().TempDir()
		head, err := gitsource.Checkout(ctx, gitsource.Source{URL: git.RepoURL("scanned"), Branch: "main",
			Auth: gitsource.Auth{Username: gitUser, Password: gitPassword}}, dir, "")
		Expect(err).NotTo(HaveOccurred())
		repo, err := gogit.PlainOpen(dir)
		Expect(err).NotTo(HaveOccurred())
		c, err := repo.CommitObject(plumbing.NewHash(head))
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Author.Name).To(Equal("Scanner"))
		Expect(c.Author.Email).To(Equal("scanner@example.com"))
		Expect(c.Message).To(Equal("bump " + image + " to 1.0.0"))

		push("1.1.0")
		Eventually(func() string { return bundleContent("scanned-app") }, 60*time.Second).Should(ContainSubstring(image + ":1.1.0"))

		// A push the server refuses: the scan says so, and the repository keeps its commit.
		hook := filepath.Join(git.Root, "scanned.git", "hooks", "pre-receive")
		Expect(os.MkdirAll(filepath.Dir(hook), 0o755)).To(Succeed())
		Expect(os.WriteFile(hook, []byte("#!/bin/sh\necho 'branch main is protected' >&2\nexit 1\n"), 0o755)).To(Succeed())
		before := bundlesOf("scanned")["scanned-app"]
		push("1.2.0")
		Eventually(func(g Gomega) {
			c := fleet.FindCondition(imageScan("web").Conditions, "Ready")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("pushing to branch main"))
		}, 60*time.Second).Should(Succeed())
		Expect(bundlesOf("scanned")["scanned-app"]).To(Equal(before))
		Expect(bundleContent("scanned-app")).To(ContainSubstring(image + ":1.1.0"))
		Expect(imageScan("web").LatestTag).To(Equal("1.2.0"), "the scan itself worked")

		// fleet.yaml declares a scan: the run creates it for the GitRepo, and it commits too.
		declared := publish("declared", "main", map[string]string{
			"app/fleet.yaml": "defaultNamespace: app\nimageScans:\n- name: web\n  image: " + image + "\n  tagName: web\n  interval: 2s\n" +
				"  secretRef:\n    name: registry\n  policy:\n    semver:\n      range: \"<1.1.0\"\n",
			"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: declared\ndata:\n  image: " + image + ":0.9.0 # {\"$imagescan\": \"web\"}\n"})
		newGitRepo("declared", "declared", nil)
		Eventually(func(g Gomega) {
			s, err := api.ImageScan().Get(fleet.DefaultNamespace, "declared-app-web", metav1.GetOptions{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.Spec.GitRepoName).To(Equal("declared"))
			g.Expect(s.Labels).To(HaveKeyWithValue(fleet.RepoLabel, "declared"))
		}, 60*time.Second).Should(Succeed())
		Eventually(func() string { return bundleContent("declared-app") }, 60*time.Second).Should(ContainSubstring(image + ":1.0.0"))
		Expect(bundlesOf("declared")["declared-app"]).NotTo(Equal(declared))

		newScan("web-wrong-auth", "registry-wrong")
		Eventually(func(g Gomega) {
			c := fleet.FindCondition(imageScan("web-wrong-auth").Conditions, "Ready")
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("listing the tags of " + image))
		}).Should(Succeed())
	})
})
