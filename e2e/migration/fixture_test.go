package migration_test

// The fixture: a Fleet installation as Fleet leaves it, written from the contract's shapes (the
// API's fields, the derived names of fleet-behaviour.md, the agent's Secret keys, the chart
// annotations Fleet's agent puts on its releases), with no process of this project running.
//
// Manager: GitRepo fleet-default/migrate (targets ClusterGroup migrated) at its repository's
// HEAD, its Bundle migrate-app and Content, the two Clusters (named from their kube-system UID)
// with their cluster namespaces, one BundleDeployment in each, and each agent's identity as a
// Fleet manager grants it: a ServiceAccount request-... in the cluster namespace with a token
// that never expires and the Roles to read its BundleDeployments and write their status and its
// Cluster's. Downstream: the agent's Secret fleet-agent (a kubeconfig, deploymentNamespace,
// clusterNamespace, clusterName) and ConfigMap, and Helm release migrate-app, revision 1, made
// as Fleet's agent makes it (no release labels; bundle ID, commit and agent namespace on the
// chart; object-set labels on every object), whose Deployment runs two Pods.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/rancher/wrangler/v3/pkg/apply"
	"github.com/rancher/wrangler/v3/pkg/genericcondition"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/harness/chartinstall"
	"github.com/fleetgo/fleet/internal/harness/localcluster"
	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

const (
	repoName, branch = "migrate", "main"
	gitRepoName      = "migrate"
	bundleName       = "migrate-app" // <gitrepo>-<path>, also the release name
	appNamespace     = "migrate-app"
	groupName        = "migrated"
)

// downstream is one downstream cluster and what Fleet left in it.
type downstream struct {
	*localcluster.Cluster
	env  string
	kube kubernetes.Interface
	// clientID is its kube-system namespace's UID; name the Cluster's name from it.
	clientID, name, clusterNS string
	// legacySA is the agent identity Fleet's manager gave it.
	legacySA string
	// fleetDeploymentID is what Fleet's manager asked of its BundleDeployment.
	fleetDeploymentID string
	// before: the workload objects' UIDs when Fleet ran it.
	podUIDs                     []types.UID
	deploymentUID, configMapUID types.UID
	agentSecretUID, clusterUID  types.UID
	fleetLastSeen               time.Time
}

var commit string

var appFiles = map[string]string{
	"fleet.yaml": "defaultNamespace: " + appNamespace + "\n",
	"configmap.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-settings
data:
  greeting: hello
`,
	"deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: app
spec:
  replicas: 2
  selector:
    matchLabels:
      app: migrate
  template:
    metadata:
      labels:
        app: migrate
    spec:
      containers:
      - name: app
        image: registry.example/app:1.0
`,
}

// manifests are the bundle's resources (fleet.yaml is the bundle's options, not a resource).
var manifests = []string{"configmap.yaml", "deployment.yaml"}

func writeFleetInstallation(ctx context.Context) {
	src := filepath.Join(GinkgoT().TempDir(), "repo")
	Expect(os.MkdirAll(filepath.Join(src, "app"), 0o755)).To(Succeed())
	for name, content := range appFiles {
		Expect(os.WriteFile(filepath.Join(src, "app", name), []byte(content), 0o644)).To(Succeed())
	}
	writeValuesFolder(src)
	var err error
	commit, err = git.Publish(ctx, repoName, branch, src, "the app")
	Expect(err).NotTo(HaveOccurred())

	for _, ns := range []string{fleet.SystemNamespace, fleet.DefaultNamespace, fleet.ClustersSystemNamespace} {
		createNamespace(ctx, managerKube, ns, nil)
	}
	// The fleet chart's ConfigMap: agents reach the manager where the test does.
	cm, err := config.Config{APIServerURL: manager.RESTConfig().Host, APIServerCA: string(manager.RESTConfig().CAData),
		AgentCheckinInterval: metav1.Duration{Duration: 2 * time.Second}}.ConfigMap(fleet.SystemNamespace)
	Expect(err).NotTo(HaveOccurred())
	_, err = managerKube.CoreV1().ConfigMaps(fleet.SystemNamespace).Create(ctx, cm, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())

	content := writeContent(appFiles, manifests)
	writeGitRepoAndBundle()
	valuesContent := writeValuesBundle()
	writeClusterGroup()
	for _, d := range downstreams {
		writeCluster(ctx, d)
		writeAgentIdentity(ctx, d)
		writeBundleDeployment(d, content)
		writeValuesDeployment(d, valuesContent)
		writeDownstream(ctx, d)
		writeValuesDownstream(ctx, d)
	}
}

func createNamespace(ctx context.Context, kube kubernetes.Interface, name string, labels map[string]string) {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) { // (the CRDs' install made cattle-fleet-system)
		Expect(err).NotTo(HaveOccurred(), "namespace %s", name)
	}
}

func readyConditions(now metav1.Time, types ...string) []genericcondition.GenericCondition {
	var out []genericcondition.GenericCondition
	for _, t := range types {
		out = append(out, genericcondition.GenericCondition{Type: t, Status: corev1.ConditionTrue, LastUpdateTime: now.UTC().Format(time.RFC3339)})
	}
	return out
}

// writeContent stores a bundle's manifest (the files names of files) as Fleet does:
// gzip-compressed JSON, named from its sha256.
func writeContent(files map[string]string, names []string) string {
	type resource struct {
		Name    string `json:"name"`
		Content string `json:"content"`
	}
	var m struct {
		Resources []resource `json:"resources"`
	}
	for _, name := range names {
		m.Resources = append(m.Resources, resource{Name: name, Content: files[name]})
	}
	raw, err := json.Marshal(m)
	Expect(err).NotTo(HaveOccurred())
	sum := sha256.Sum256(raw)
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	_, err = w.Write(raw)
	Expect(err).NotTo(HaveOccurred())
	Expect(w.Close()).To(Succeed())
	name := "s-" + hex.EncodeToString(sum[:])
	_, err = api.Content().Create(&fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: name}, Content: gz.Bytes(), SHA256Sum: hex.EncodeToString(sum[:])})
	Expect(err).NotTo(HaveOccurred())
	return name
}

func writeGitRepoAndBundle() {
	now := metav1.Now()
	targets := []fleet.GitTarget{{Name: "migrated", ClusterGroup: groupName}}
	gr, err := api.GitRepo().Create(&fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: gitRepoName, Namespace: fleet.DefaultNamespace, Finalizers: []string{fleet.GitRepoFinalizer}},
		Spec: fleet.GitRepoSpec{Repo: git.RepoURL(repoName), Branch: branch, Paths: []string{"app", "values"}, Targets: targets,
			PollingInterval: &metav1.Duration{Duration: 2 * time.Second}}})
	Expect(err).NotTo(HaveOccurred())
	gr.Status.Commit, gr.Status.ObservedGeneration, gr.Status.GitJobStatus = commit, gr.Generation, "Current"
	gr.Status.Display.ReadyBundleDeployments = "4/4"
	gr.Status.DesiredReadyClusters, gr.Status.ReadyClusters = 2, 2
	gr.Status.Summary = fleet.BundleSummary{DesiredReady: 4, Ready: 4}
	gr.Status.Conditions = readyConditions(now, string(fleet.ConditionReady), "Accepted")
	_, err = api.GitRepo().UpdateStatus(gr)
	Expect(err).NotTo(HaveOccurred())

	var resources []fleet.BundleResource
	for _, name := range manifests {
		resources = append(resources, fleet.BundleResource{Name: name, Content: appFiles[name]})
	}
	b, err := api.Bundle().Create(&fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: bundleName, Namespace: fleet.DefaultNamespace, Finalizers: []string{fleet.BundleFinalizer},
			Labels: map[string]string{fleet.RepoLabel: gitRepoName, fleet.CommitLabel: commit}},
		Spec: fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: appNamespace},
			Resources: resources, Targets: []fleet.BundleTarget{{Name: "migrated", ClusterGroup: groupName}}}})
	Expect(err).NotTo(HaveOccurred())
	b.Status.Summary = fleet.BundleSummary{DesiredReady: 2, Ready: 2}
	b.Status.Display.ReadyClusters = "2/2"
	b.Status.ObservedGeneration = b.Generation
	b.Status.Conditions = readyConditions(now, string(fleet.ConditionReady))
	_, err = api.Bundle().UpdateStatus(b)
	Expect(err).NotTo(HaveOccurred())
}

func writeClusterGroup() {
	g, err := api.ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: groupName, Namespace: fleet.DefaultNamespace},
		Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"migrate": "yes"}}}})
	Expect(err).NotTo(HaveOccurred())
	g.Status.ClusterCount, g.Status.Display.ReadyClusters = 2, "2/2"
	_, err = api.ClusterGroup().UpdateStatus(g)
	Expect(err).NotTo(HaveOccurred())
}

// writeCluster writes the Cluster as Fleet's registration left it, and its cluster namespace.
func writeCluster(ctx context.Context, d *downstream) {
	var err error
	d.kube, err = kubernetes.NewForConfig(d.RESTConfig())
	Expect(err).NotTo(HaveOccurred())
	ks, err := d.kube.CoreV1().Namespaces().Get(ctx, metav1.NamespaceSystem, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	d.clientID = string(ks.UID)
	// cluster- and the first 12 hex digits of the clientID's SHA-256 (fleet-behaviour.md).
	sum := sha256.Sum256([]byte(d.clientID))
	d.name = "cluster-" + hex.EncodeToString(sum[:])[:12]
	d.clusterNS = names.ClusterNamespace(fleet.DefaultNamespace, d.name)
	createNamespace(ctx, managerKube, d.clusterNS, map[string]string{fleet.ManagedLabel: "true",
		fleet.ClusterLabel: d.name, fleet.ClusterNamespaceLabel: fleet.DefaultNamespace})

	c, err := api.Cluster().Create(&fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: d.name, Namespace: fleet.DefaultNamespace, Finalizers: []string{fleet.ClusterFinalizer},
			Labels: map[string]string{"env": d.env, "migrate": "yes"}},
		Spec: fleet.ClusterSpec{ClientID: d.clientID}})
	Expect(err).NotTo(HaveOccurred())
	d.clusterUID = c.UID
	d.fleetLastSeen = time.Now().Add(-time.Minute).Truncate(time.Second)
	c.Status.Namespace = d.clusterNS
	c.Status.Agent = fleet.AgentStatus{LastSeen: metav1.NewTime(d.fleetLastSeen), Namespace: fleet.SystemNamespace}
	c.Status.Summary = fleet.BundleSummary{DesiredReady: 2, Ready: 2}
	c.Status.Display.ReadyBundles = "2/2"
	c.Status.Conditions = readyConditions(metav1.Now(), string(fleet.ConditionReady), "Processed")
	_, err = api.Cluster().UpdateStatus(c)
	Expect(err).NotTo(HaveOccurred())
}

// writeAgentIdentity is what Fleet's manager grants a registering agent: a ServiceAccount of its
// own in the cluster namespace with a token Secret (no expiry), reading the cluster namespace's
// BundleDeployments (and their option Secrets) and writing their status, patching its Cluster's
// status, getting Contents.
func writeAgentIdentity(ctx context.Context, d *downstream) {
	d.legacySA = names.SafeConcatName("request-"+d.env, d.clientID)
	_, err := managerKube.CoreV1().ServiceAccounts(d.clusterNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: d.legacySA,
		Labels: map[string]string{fleet.ManagedLabel: "true"}, Annotations: map[string]string{"fleet.cattle.io/cluster": d.name}}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = managerKube.CoreV1().Secrets(d.clusterNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: d.legacySA + "-token",
		Annotations: map[string]string{corev1.ServiceAccountNameKey: d.legacySA}}, Type: corev1.SecretTypeServiceAccountToken}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())

	g := fleet.SchemeGroupVersion.Group
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: d.legacySA, Namespace: d.clusterNS}}
	role := func(ns string, rules ...rbacv1.PolicyRule) {
		_, err := managerKube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: d.legacySA}, Rules: rules}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = managerKube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: d.legacySA},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: d.legacySA}, Subjects: subject}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
	}
	role(d.clusterNS,
		rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{"bundledeployments"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{"bundledeployments/status"}, Verbs: []string{"update", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}})
	role(fleet.DefaultNamespace,
		rbacv1.PolicyRule{APIGroups: []string{g}, Resources: []string{"clusters/status"}, Verbs: []string{"patch"}, ResourceNames: []string{d.name}})
	_, err = managerKube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: d.legacySA + "-content"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{g}, Resources: []string{"contents"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	_, err = managerKube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: d.legacySA + "-content"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: d.legacySA + "-content"}, Subjects: subject}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
}

// legacyToken waits for the token kube-controller-manager writes into the identity's Secret.
func legacyToken(ctx context.Context, d *downstream) string {
	var token string
	Eventually(func(g Gomega) {
		s, err := managerKube.CoreV1().Secrets(d.clusterNS).Get(ctx, d.legacySA+"-token", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		token = string(s.Data[corev1.ServiceAccountTokenKey])
		g.Expect(token).NotTo(BeEmpty())
	}).Should(Succeed())
	return token
}

func writeBundleDeployment(d *downstream, content string) {
	d.fleetDeploymentID = writeDeployment(d, bundleName, appNamespace, fleet.BundleDeploymentOptions{DefaultNamespace: appNamespace}, content, "")
}

// writeDeployment writes d's BundleDeployment name of a bundle as Fleet's manager writes it
// (opts, its valuesHash when its values are in a Secret), reported applied by Fleet's agent as
// revision 1 of release releaseNS/name. It returns the deploymentID.
func writeDeployment(d *downstream, name, releaseNS string, opts fleet.BundleDeploymentOptions, content, valuesHash string) string {
	raw, err := json.Marshal(opts)
	Expect(err).NotTo(HaveOccurred())
	sum := sha256.Sum256(raw)
	id := content + ":" + hex.EncodeToString(sum[:])
	bd, err := api.BundleDeployment().Create(&fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: d.clusterNS, Finalizers: []string{fleet.BundleDeploymentFinalizer},
			Labels: map[string]string{fleet.BundleLabel: name, fleet.BundleNamespaceLabel: fleet.DefaultNamespace,
				fleet.RepoLabel: gitRepoName, fleet.CommitLabel: commit, fleet.ManagedLabel: "true",
				fleet.ClusterLabel: d.name, fleet.ClusterNamespaceLabel: fleet.DefaultNamespace}},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: id, StagedDeploymentID: id, Options: opts, StagedOptions: opts, ValuesHash: valuesHash}})
	Expect(err).NotTo(HaveOccurred())
	bd.Status.AppliedDeploymentID = id
	bd.Status.Release = releaseNS + "/" + name + ":1"
	bd.Status.Ready, bd.Status.NonModified = true, true
	bd.Status.Display = fleet.BundleDeploymentDisplay{Deployed: "Yes", Monitored: "Yes", State: "Ready"}
	bd.Status.Conditions = readyConditions(metav1.Now(), string(fleet.ConditionReady), string(fleet.ConditionDeployed), string(fleet.ConditionInstalled), "Monitored")
	_, err = api.BundleDeployment().UpdateStatus(bd)
	Expect(err).NotTo(HaveOccurred())
	return id
}

// writeDownstream leaves in the downstream cluster what Fleet's agent had there: its Secret
// and ConfigMap, and the release with its running Pods.
func writeDownstream(ctx context.Context, d *downstream) {
	createNamespace(ctx, d.kube, fleet.SystemNamespace, nil)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["cluster"] = &clientcmdapi.Cluster{Server: manager.RESTConfig().Host, CertificateAuthorityData: manager.RESTConfig().CAData}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{Token: legacyToken(ctx, d)}
	kc.Contexts["default"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: "user", Namespace: d.clusterNS}
	kc.CurrentContext = "default"
	raw, err := clientcmd.Write(*kc)
	Expect(err).NotTo(HaveOccurred())
	s, err := d.kube.CoreV1().Secrets(fleet.SystemNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fleet-agent"},
		Data: map[string][]byte{"kubeconfig": raw, "deploymentNamespace": []byte(d.clusterNS),
			"clusterNamespace": []byte(fleet.DefaultNamespace), "clusterName": []byte(d.name)}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	d.agentSecretUID = s.UID
	_, err = d.kube.CoreV1().ConfigMaps(fleet.SystemNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fleet-agent"},
		Data: map[string]string{"config": `{"labels":{"env":"` + d.env + `"},"agentTLSMode":"system-store"}`}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())

	dir := fleetChart(bundleName, appFiles, manifests)
	_, err = chartinstall.InstallOrUpgrade(ctx, chartinstall.Options{Kubeconfig: d.Kubeconfig, Namespace: appNamespace,
		ReleaseName: bundleName, ChartDir: dir})
	Expect(err).NotTo(HaveOccurred())

	Eventually(func(g Gomega) {
		dep, err := d.kube.AppsV1().Deployments(appNamespace).Get(ctx, "app", metav1.GetOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(dep.Status.ReadyReplicas).To(BeEquivalentTo(2))
		d.deploymentUID = dep.UID
		d.podUIDs = podUIDs(ctx, g, d)
		g.Expect(d.podUIDs).To(HaveLen(2))
	}, 2*time.Minute).Should(Succeed())
	cm, err := d.kube.CoreV1().ConfigMaps(appNamespace).Get(ctx, "app-settings", metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	d.configMapUID = cm.UID
}

// fleetChart is the chart Fleet's agent makes of a bundle's files (names): the bundle's own
// Chart.yaml, or one made for raw manifests (which become templates), with the bundle ID, commit
// and agent namespace as annotations; every object carries the object-set labels and
// annotations its post-renderer adds.
func fleetChart(bundleID string, files map[string]string, names []string) string {
	dir := filepath.Join(GinkgoT().TempDir(), "chart-"+bundleID)
	Expect(os.MkdirAll(filepath.Join(dir, "templates"), 0o755)).To(Succeed())
	chartYAML, ok := files["Chart.yaml"]
	if !ok {
		chartYAML = "apiVersion: v2\nname: " + bundleID + "\nversion: 0.0.0\n"
	}
	chartYAML += "annotations:\n  fleet.cattle.io/bundle-id: " + bundleID + "\n  fleet.cattle.io/commit: " + commit + "\n" +
		"  fleet.cattle.io/agent-namespace: " + fleet.SystemNamespace + "\n"
	Expect(os.WriteFile(filepath.Join(dir, "Chart.yaml"), []byte(chartYAML), 0o644)).To(Succeed())
	setLabels, setAnnotations, err := apply.GetLabelsAndAnnotations("fleet-agent-bundle-"+bundleID, nil)
	Expect(err).NotTo(HaveOccurred())
	labels, err := json.Marshal(setLabels)
	Expect(err).NotTo(HaveOccurred())
	annotations, err := json.Marshal(setAnnotations)
	Expect(err).NotTo(HaveOccurred())
	for _, name := range names {
		content, out := files[name], filepath.Join(dir, name)
		if name == "Chart.yaml" {
			continue
		}
		if name != "values.yaml" {
			content = strings.Replace(content, "metadata:\n", "metadata:\n  labels: "+string(labels)+"\n  annotations: "+string(annotations)+"\n", 1)
		}
		if !strings.HasPrefix(name, "templates/") && name != "values.yaml" {
			out = filepath.Join(dir, "templates", name) // a raw manifest
		}
		Expect(os.MkdirAll(filepath.Dir(out), 0o755)).To(Succeed())
		Expect(os.WriteFile(out, []byte(content), 0o644)).To(Succeed())
	}
	return dir
}

func podUIDs(ctx context.Context, g Gomega, d *downstream) []types.UID {
	pods, err := d.kube.CoreV1().Pods(appNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app=migrate"})
	g.Expect(err).NotTo(HaveOccurred())
	var out []types.UID
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			out = append(out, p.UID)
		}
	}
	return out
}

// releaseRevisions are the revisions of the app's release in d, from Helm's storage Secrets.
func releaseRevisions(ctx context.Context, g Gomega, d *downstream) []string {
	return revisionsOf(ctx, g, d, appNamespace, bundleName)
}

// revisionsOf are the revisions of release ns/name in d, from Helm's storage Secrets.
func revisionsOf(ctx context.Context, g Gomega, d *downstream, ns, name string) []string {
	secrets, err := d.kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + name})
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, s := range secrets.Items {
		out = append(out, s.Labels["version"]+"="+strings.ToLower(s.Labels["status"]))
	}
	return out
}
