package localcluster_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/fleetgo/fleet/internal/harness/localcluster"
)

func clientset(c *localcluster.Cluster) *kubernetes.Clientset {
	cs, err := c.Clientset()
	Expect(err).NotTo(HaveOccurred())
	return cs
}

func createNamespace(ctx context.Context, cs kubernetes.Interface, prefix string) string {
	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx context.Context) {
		_ = cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
	})
	return ns.Name
}

var _ = Describe("two clusters started at once", func() {
	It("are independent: objects and credentials of one mean nothing to the other", func(ctx context.Context) {
		a, b := clientset(workloads), clientset(controllers)
		Expect(workloads.Server).NotTo(Equal(controllers.Server))

		ns := createNamespace(ctx, a, "only-in-a")
		_, err := a.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = b.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s must not exist in the other cluster, got %v", ns, err)

		// A's admin credential pointed at B's apiserver (trusting B's CA) is not accepted:
		// every cluster has its own certificate authority.
		crossed := workloads.RESTConfig()
		crossed.Host = controllers.Server
		crossed.TLSClientConfig.CAData = controllers.RESTConfig().TLSClientConfig.CAData
		cs, err := kubernetes.NewForConfig(crossed)
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsUnauthorized(err)).To(BeTrue(), "expected 401, got %v", err)
	})
})

var _ = Describe("RBAC", func() {
	It("lets a ServiceAccount token with a Role in one namespace read there and get 403 in another", func(ctx context.Context) {
		cs := clientset(workloads)
		allowed := createNamespace(ctx, cs, "rbac-allowed")
		other := createNamespace(ctx, cs, "rbac-other")

		_, err := cs.CoreV1().ServiceAccounts(allowed).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().Roles(allowed).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "read-configmaps"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.RbacV1().RoleBindings(allowed).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "read-configmaps"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: allowed}},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		tr, err := cs.CoreV1().ServiceAccounts(allowed).CreateToken(ctx, "reader", &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(tr.Status.Token).NotTo(BeEmpty())

		anon := rest.AnonymousClientConfig(workloads.RESTConfig())
		anon.BearerToken = tr.Status.Token
		sa, err := kubernetes.NewForConfig(anon)
		Expect(err).NotTo(HaveOccurred())

		// RoleBindings take effect as soon as the authorizer's cache has them.
		Eventually(func(ctx context.Context) error {
			_, err := sa.CoreV1().ConfigMaps(allowed).List(ctx, metav1.ListOptions{})
			return err
		}).WithContext(ctx).Should(Succeed())
		_, err = sa.CoreV1().ConfigMaps(other).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "expected 403 in %s, got %v", other, err)
		_, err = sa.CoreV1().Secrets(allowed).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "expected 403 for secrets, got %v", err)
	})
})

var _ = Describe("kube-controller-manager", func() {
	It("garbage-collects an object whose owner was deleted", func(ctx context.Context) {
		cs := clientset(controllers)
		ns := createNamespace(ctx, cs, "gc")
		owner, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "dependent",
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
			}},
		}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		Expect(cs.CoreV1().ConfigMaps(ns).Delete(ctx, owner.Name, metav1.DeleteOptions{})).To(Succeed())
		Eventually(func(ctx context.Context) bool {
			_, err := cs.CoreV1().ConfigMaps(ns).Get(ctx, "dependent", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}).WithContext(ctx).WithTimeout(time.Minute).Should(BeTrue(), "dependent must be garbage-collected")
	})
})

var _ = Describe("kwok", func() {
	It("makes a Deployment Available on the fake node", func(ctx context.Context) {
		cs := clientset(workloads)
		ns := createNamespace(ctx, cs, "deploy")
		labels := map[string]string{"app": "web"}
		_, err := cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
				},
			},
		}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())

		Eventually(func(ctx context.Context) (int32, error) {
			d, err := cs.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return 0, err
			}
			for _, c := range d.Status.Conditions {
				if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
					return d.Status.ReadyReplicas, nil
				}
			}
			return -1, nil
		}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Equal(int32(2)))

		pods, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			Expect(p.Spec.NodeName).To(Equal(localcluster.FakeNodeName))
			Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}
	})
})

// processesMentioning lists the PIDs whose command line contains s, to prove nothing a cluster
// started outlives it.
func processesMentioning(s string) []string {
	entries, err := os.ReadDir("/proc")
	Expect(err).NotTo(HaveOccurred())
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), s) {
			pids = append(pids, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return pids
}

// binDirWith makes a bin folder holding the real binaries except for the replacements given.
func binDirWith(replace map[string]string) string {
	real, err := localcluster.BinDir()
	Expect(err).NotTo(HaveOccurred())
	dir := GinkgoT().TempDir()
	entries, err := os.ReadDir(real)
	Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		if _, replaced := replace[e.Name()]; replaced || e.IsDir() {
			continue
		}
		Expect(os.Symlink(filepath.Join(real, e.Name()), filepath.Join(dir, e.Name()))).To(Succeed())
	}
	for name, script := range replace {
		if script == "" {
			continue // left out: a missing binary
		}
		Expect(os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755)).To(Succeed())
	}
	return dir
}

var _ = Describe("bad input", func() {
	It("fails fast when a binary is missing, naming it, and starts nothing", func(ctx context.Context) {
		dir := GinkgoT().TempDir()
		start := time.Now()
		c, err := localcluster.Start(ctx, localcluster.Options{
			Name: "nobin", Tier: localcluster.Controllers, Dir: dir,
			BinDir: binDirWith(map[string]string{"kube-controller-manager": ""}),
		})
		Expect(err).To(HaveOccurred())
		Expect(c).To(BeNil())
		Expect(err.Error()).To(ContainSubstring("kube-controller-manager"))
		Expect(err.Error()).To(ContainSubstring("not found"))
		Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second), "a missing binary is found before anything starts")
		Expect(processesMentioning(dir)).To(BeEmpty())
	})

	It("fails fast when the apiserver's port is busy, naming kube-apiserver and its log, leaving nothing running", func(ctx context.Context) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		Expect(err).NotTo(HaveOccurred())
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		dir := GinkgoT().TempDir()

		_, err = localcluster.Start(ctx, localcluster.Options{Name: "busy", Dir: dir, APIServerPort: port})
		Expect(err).To(HaveOccurred())
		msg := err.Error()
		Expect(msg).To(ContainSubstring("kube-apiserver exited"))
		Expect(msg).To(ContainSubstring(filepath.Join(dir, "logs", "kube-apiserver.log")))
		Expect(msg).To(ContainSubstring(fmt.Sprint(port)))
		Expect(processesMentioning(dir)).To(BeEmpty(), "etcd must be stopped when the apiserver fails")
	})

	It("reports a component that dies at start with its log, leaving nothing running", func(ctx context.Context) {
		dir := GinkgoT().TempDir()
		_, err := localcluster.Start(ctx, localcluster.Options{
			Name: "dies", Tier: localcluster.Controllers, Dir: dir,
			BinDir: binDirWith(map[string]string{
				"kube-controller-manager": "#!/bin/sh\necho 'E0000 cannot start: injected failure' >&2\nexit 3\n",
			}),
		})
		Expect(err).To(HaveOccurred())
		msg := err.Error()
		Expect(msg).To(ContainSubstring("kube-controller-manager exited unexpectedly (exit status 3)"))
		Expect(msg).To(ContainSubstring(filepath.Join(dir, "logs", "kube-controller-manager.log")))
		Expect(msg).To(ContainSubstring("injected failure"))
		Expect(processesMentioning(dir)).To(BeEmpty())
	})

	It("stops every process of a cluster on Stop", func(ctx context.Context) {
		dir := GinkgoT().TempDir()
		c, err := localcluster.Start(ctx, localcluster.Options{Name: "stopme", Dir: dir})
		Expect(err).NotTo(HaveOccurred())
		Expect(processesMentioning(dir)).To(HaveLen(2), "etcd and kube-apiserver run")
		c.Stop()
		Expect(processesMentioning(dir)).To(BeEmpty())
		Expect(c.Healthy()).To(HaveOccurred(), "a stopped cluster is not healthy")
	})
})

var _ = Describe("an apiserver stopped and started again", func() {
	It("refuses clients while down and serves the same data on the same address after", func(ctx context.Context) {
		cs := clientset(controllers)
		ns := createNamespace(ctx, cs, "survives-restart")
		server := controllers.Server

		Expect(controllers.StopAPIServer()).To(Succeed())
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		Expect(err).To(MatchError(ContainSubstring("connection refused")))
		Expect(controllers.StartAPIServer(ctx)).To(Succeed())

		Expect(controllers.Server).To(Equal(server))
		Expect(controllers.Healthy()).To(Succeed())
		got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(got.Name).To(Equal(ns))
		Expect(controllers.StartAPIServer(ctx)).To(MatchError(ContainSubstring("running")))
	})
})
