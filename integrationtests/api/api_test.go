package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// newNamespace creates a namespace for one spec and deletes it afterwards.
func newNamespace(ctx context.Context) string {
	cs, err := cluster.Clientset()
	Expect(err).NotTo(HaveOccurred())
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "api-"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx context.Context) {
		_ = cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

// fixture reads testdata/NAME into obj and moves it into namespace ns.
func fixture(name string, obj metav1.Object, ns string) {
	data, err := os.ReadFile(filepath.Join("testdata", name))
	Expect(err).NotTo(HaveOccurred())
	Expect(yaml.UnmarshalStrict(data, obj)).To(Succeed(), "fixture %s must use only fields our types know", name)
	obj.SetNamespace(ns)
}

// table GETs a resource list as the apiserver's Table, the way kubectl get prints it.
func table(ctx context.Context, path string) *metav1.Table {
	cfg := cluster.RESTConfig()
	client, err := rest.HTTPClientFor(cfg)
	Expect(err).NotTo(HaveOccurred())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cfg.Host+path, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := client.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.StatusCode).To(Equal(http.StatusOK), string(body))
	t := &metav1.Table{}
	Expect(json.Unmarshal(body, t)).To(Succeed())
	return t
}

func columnNames(t *metav1.Table) []string {
	var names []string
	for _, c := range t.ColumnDefinitions {
		names = append(names, c.Name)
	}
	return names
}

var _ = Describe("Fleet's documented manifests", func() {
	It("are accepted and read back through the generated clients", func(ctx context.Context) {
		ns := newNamespace(ctx)

		gr := &fleet.GitRepo{}
		fixture("gitrepo.yaml", gr, ns)
		_, err := clients.GitRepo().Create(gr)
		Expect(err).NotTo(HaveOccurred())
		got, err := clients.GitRepo().Get(ns, "sample", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Spec.Repo).To(Equal("https://github.com/rancher/fleet-examples"))
		Expect(got.Spec.Branch).To(Equal("master"))
		Expect(got.Spec.Paths).To(Equal([]string{"simple"}))
		Expect(got.Spec.Targets).To(HaveLen(1))
		Expect(got.Spec.Targets[0].ClusterSelector.MatchLabels).To(Equal(map[string]string{"env": "prod"}))
		Expect(got.Spec.Targets[0].ClusterSelector.MatchExpressions[0].Values).To(Equal([]string{"eu", "us"}))

		crt := &fleet.ClusterRegistrationToken{}
		fixture("clusterregistrationtoken.yaml", crt, ns)
		_, err = clients.ClusterRegistrationToken().Create(crt)
		Expect(err).NotTo(HaveOccurred())
		gotToken, err := clients.ClusterRegistrationToken().Get(ns, "new-token", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(gotToken.Spec.TTL.Duration.Hours()).To(BeNumerically("==", 240))

		c := &fleet.Cluster{}
		fixture("cluster.yaml", c, ns)
		_, err = clients.Cluster().Create(c)
		Expect(err).NotTo(HaveOccurred())
		clusters, err := clients.Cluster().List(ns, metav1.ListOptions{LabelSelector: "env=prod"})
		Expect(err).NotTo(HaveOccurred())
		Expect(clusters.Items).To(HaveLen(1))
		Expect(clusters.Items[0].Spec.KubeConfigSecret).To(Equal("my-cluster-kubeconfig"))

		// The status subresource is separate from the spec: agents and the manager write it.
		got.Status.Commit = "0123abcd"
		got.Status.Display.ReadyBundleDeployments = "1/2"
		_, err = clients.GitRepo().UpdateStatus(got)
		Expect(err).NotTo(HaveOccurred())
		again, err := clients.GitRepo().Get(ns, "sample", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(again.Status.Commit).To(Equal("0123abcd"))
	})

	It("take HelmOps, Schedules, ImageScans and Policies as Fleet users write them, with their columns", func(ctx context.Context) {
		ns := newNamespace(ctx)
		op := &fleet.HelmOp{}
		fixture("helmop.yaml", op, ns)
		_, err := clients.HelmOp().Create(op)
		Expect(err).NotTo(HaveOccurred())
		gotOp, err := clients.HelmOp().Get(ns, "web", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(gotOp.Spec.Helm.Repo).To(Equal("https://charts.example.com/stable"))
		Expect(gotOp.Spec.Helm.Version).To(Equal(">=1.2.0 <2.0.0"))
		Expect(gotOp.Spec.PollingInterval.Duration.Minutes()).To(BeNumerically("==", 5))
		Expect(gotOp.Spec.Targets[0].Helm.Values.Data).To(HaveKeyWithValue("replicas", BeNumerically("==", 3)))
		gotOp.Status.Version = "1.4.2"
		_, err = clients.HelmOp().UpdateStatus(gotOp)
		Expect(err).NotTo(HaveOccurred())
		ops := table(ctx, "/apis/fleet.cattle.io/v1alpha1/namespaces/"+ns+"/helmops")
		Expect(columnNames(ops)).To(ContainElements("Name", "Repo", "Chart", "Version", "BundleDeployments-Ready", "Status"))
		Expect(ops.Rows[0].Cells).To(ContainElements("https://charts.example.com/stable", "web", "1.4.2"))

		sched := &fleet.Schedule{}
		fixture("schedule.yaml", sched, ns)
		_, err = clients.Schedule().Create(sched)
		Expect(err).NotTo(HaveOccurred())
		gotSched, err := clients.Schedule().Get(ns, "weekend", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(gotSched.Spec.Duration.Hours()).To(BeNumerically("==", 2))
		Expect(gotSched.Spec.Targets.Clusters).To(HaveLen(2))
		Expect(gotSched.Spec.Targets.Clusters[1].ClusterName).To(Equal("edge-1"))
		Expect(columnNames(table(ctx, "/apis/fleet.cattle.io/v1alpha1/namespaces/"+ns+"/schedules"))).
			To(ContainElements("Schedule", "Duration", "Active", "NextStart"))

		scan := &fleet.ImageScan{}
		fixture("imagescan.yaml", scan, ns)
		_, err = clients.ImageScan().Create(scan)
		Expect(err).NotTo(HaveOccurred())
		gotScan, err := clients.ImageScan().Get(ns, "web-image", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(gotScan.Spec.Policy.SemVer.Range).To(Equal(">=1.0.0 <2.0.0"))
		Expect(gotScan.Spec.SecretRef.Name).To(Equal("registry-auth"))
		Expect(columnNames(table(ctx, "/apis/fleet.cattle.io/v1alpha1/namespaces/"+ns+"/imagescans"))).To(ContainElements("Repository", "Latest"))

		pol := &fleet.Policy{}
		fixture("policy.yaml", pol, ns)
		_, err = clients.Policy().Create(pol)
		Expect(err).NotTo(HaveOccurred())
		gotPol, err := clients.Policy().Get(ns, "team", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(gotPol.RequireServiceAccount).To(BeTrue())
		Expect(*gotPol.AllowNamespaceCreation).To(BeFalse())
		Expect(gotPol.HelmOp.AllowedChartPatterns).To(Equal([]string{"^web$"}))
	})

	It("show Fleet's printer columns in the apiserver's tables", func(ctx context.Context) {
		ns := newNamespace(ctx)
		gr := &fleet.GitRepo{}
		fixture("gitrepo.yaml", gr, ns)
		_, err := clients.GitRepo().Create(gr)
		Expect(err).NotTo(HaveOccurred())
		c := &fleet.Cluster{}
		fixture("cluster.yaml", c, ns)
		_, err = clients.Cluster().Create(c)
		Expect(err).NotTo(HaveOccurred())

		gitrepos := table(ctx, "/apis/fleet.cattle.io/v1alpha1/namespaces/"+ns+"/gitrepos")
		Expect(columnNames(gitrepos)).To(ContainElements("Name", "Repo", "Commit", "BundleDeployments-Ready", "Status"))
		Expect(gitrepos.Rows).To(HaveLen(1))
		Expect(gitrepos.Rows[0].Cells).To(ContainElement("https://github.com/rancher/fleet-examples"))

		clusters := table(ctx, "/apis/fleet.cattle.io/v1alpha1/namespaces/"+ns+"/clusters")
		Expect(columnNames(clusters)).To(ContainElements("Name", "Bundles-Ready", "Last-Seen", "Status"))
	})

	It("are all in the fleet category", func(ctx context.Context) {
		cs, err := cluster.Clientset()
		Expect(err).NotTo(HaveOccurred())
		_, lists, err := cs.Discovery().ServerGroupsAndResources()
		Expect(err).NotTo(HaveOccurred())
		inCategory := map[string]bool{}
		for _, l := range lists {
			if l.GroupVersion != "fleet.cattle.io/v1alpha1" {
				continue
			}
			for _, r := range l.APIResources {
				for _, cat := range r.Categories {
					if cat == "fleet" {
						inCategory[r.Name] = true
					}
				}
			}
		}
		for _, plural := range crdNames {
			Expect(inCategory).To(HaveKey(plural))
		}
	})
})

var _ = Describe("defaults", func() {
	It("fills in the documented defaults", func(ctx context.Context) {
		ns := newNamespace(ctx)
		b := &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "defaults", Namespace: ns},
			Spec:       fleet.BundleSpec{DependsOn: []fleet.BundleRef{{Name: "base"}}},
		}
		_, err := clients.Bundle().Create(b)
		Expect(err).NotTo(HaveOccurred())
		got, err := clients.Bundle().Get(ns, "defaults", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Spec.TargetCustomizationMode).To(Equal("FirstMatch"))
		Expect(got.Spec.DependsOn[0].AcceptedStates).To(Equal([]fleet.BundleState{fleet.Ready}))
	})
})

var _ = Describe("invalid input", func() {
	// rejected asserts the apiserver refused the object as invalid, naming every given part.
	rejected := func(err error, parts ...string) {
		GinkgoHelper()
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "expected 422 Invalid, got %v", err)
		for _, p := range parts {
			Expect(err.Error()).To(ContainSubstring(p))
		}
	}

	It("rejects a label selector with an unknown operator, naming the field", func(ctx context.Context) {
		ns := newNamespace(ctx)
		gr := &fleet.GitRepo{}
		fixture("gitrepo.yaml", gr, ns)
		gr.Spec.Targets[0].ClusterSelector.MatchExpressions[0].Operator = "Equals"
		_, err := clients.GitRepo().Create(gr)
		rejected(err, "spec.targets[0].clusterSelector", "operator")
	})

	It("rejects a malformed duration, naming the field", func(ctx context.Context) {
		ns := newNamespace(ctx)
		gr := &fleet.GitRepo{}
		fixture("gitrepo.yaml", gr, ns)
		raw := map[string]any{}
		data, err := json.Marshal(gr)
		Expect(err).NotTo(HaveOccurred())
		Expect(json.Unmarshal(data, &raw)).To(Succeed())
		raw["spec"].(map[string]any)["pollingInterval"] = "15 seconds"
		body, err := json.Marshal(raw)
		Expect(err).NotTo(HaveOccurred())
		// The typed client cannot even hold a bad duration, so this is sent as raw JSON, as
		// kubectl apply would.
		cs, err := cluster.Clientset()
		Expect(err).NotTo(HaveOccurred())
		err = cs.RESTClient().Post().AbsPath("/apis/fleet.cattle.io/v1alpha1/namespaces", ns, "gitrepos").
			Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Error()
		rejected(err, "spec.pollingInterval")

		crt := map[string]any{
			"apiVersion": "fleet.cattle.io/v1alpha1", "kind": "ClusterRegistrationToken",
			"metadata": map[string]any{"name": "bad-ttl"},
			"spec":     map[string]any{"ttl": "forever"},
		}
		body, err = json.Marshal(crt)
		Expect(err).NotTo(HaveOccurred())
		err = cs.RESTClient().Post().AbsPath("/apis/fleet.cattle.io/v1alpha1/namespaces", ns, "clusterregistrationtokens").
			Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Error()
		rejected(err, "spec.ttl")
	})

	It("rejects a Helm release name over 53 characters, naming the field", func(ctx context.Context) {
		ns := newNamespace(ctx)
		b := &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "long-release", Namespace: ns},
			Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				Helm: &fleet.HelmOptions{ReleaseName: strings.Repeat("a", 54)},
			}},
		}
		_, err := clients.Bundle().Create(b)
		rejected(err, "spec.helm.releaseName", "53")

		b.Spec.Helm.ReleaseName = strings.Repeat("a", 53)
		_, err = clients.Bundle().Create(b)
		Expect(err).NotTo(HaveOccurred(), "53 characters is the limit, not past it")
	})

	It("rejects an unknown state in dependsOn, naming the field", func(ctx context.Context) {
		ns := newNamespace(ctx)
		b := &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "deps", Namespace: ns},
			Spec:       fleet.BundleSpec{DependsOn: []fleet.BundleRef{{Name: "base", AcceptedStates: []fleet.BundleState{"Sleeping"}}}},
		}
		_, err := clients.Bundle().Create(b)
		rejected(err, "spec.dependsOn[0].acceptedStates[0]")
	})

	It("rejects a BundleDeployment status with an unknown state, naming the field, and takes a known one", func(ctx context.Context) {
		ns := newNamespace(ctx)
		bd, err := clients.BundleDeployment().Create(&fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "garbage", Namespace: ns},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-1:abc"}})
		Expect(err).NotTo(HaveOccurred())
		bd.Status.Display.State = "Exploded"
		_, err = clients.BundleDeployment().UpdateStatus(bd)
		rejected(err, "status.display.state", "Exploded")

		bd.Status.Display.State = string(fleet.WaitApplied)
		_, err = clients.BundleDeployment().UpdateStatus(bd)
		Expect(err).NotTo(HaveOccurred())
	})
})
