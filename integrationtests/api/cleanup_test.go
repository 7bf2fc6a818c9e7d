package api_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("fleet cleanup", func() {
	It("clusterregistration deletes superseded and orphaned registrations, and leaves pending ones", func(ctx context.Context) {
		kube, err := kubernetes.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		const ns = "cleaned"
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		_, err = clients.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "alive", Namespace: ns}})
		Expect(err).NotTo(HaveOccurred())
		register := func(name, clientID, clusterName string, granted bool) *fleet.ClusterRegistration {
			r, err := clients.ClusterRegistration().Create(&fleet.ClusterRegistration{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
				Spec: fleet.ClusterRegistrationSpec{ClientID: clientID, ClientRandom: name}})
			Expect(err).NotTo(HaveOccurred())
			if granted {
				r.Status.Granted, r.Status.ClusterName = true, clusterName
				r, err = clients.ClusterRegistration().UpdateStatus(r)
				Expect(err).NotTo(HaveOccurred())
			}
			return r
		}
		older := register("older", "agent-1", "alive", true)
		// Registrations a second apart, as an agent's are.
		Eventually(func() bool { return time.Now().After(older.CreationTimestamp.Add(1100 * time.Millisecond)) }, 10*time.Second).Should(BeTrue())
		register("newer", "agent-1", "alive", true)
		register("orphan", "agent-2", "gone", true)
		register("pending", "agent-3", "", false)

		out, err := testenv.FleetCLI("cleanup", "clusterregistration", "--kubeconfig", cluster.Kubeconfig, "--dry-run")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("would delete clusterregistration cleaned/older"))
		_, err = clients.ClusterRegistration().Get(ns, "older", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), "a dry run deletes nothing")

		out, err = testenv.FleetCLI("cleanup", "clusterregistration", "--kubeconfig", cluster.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("deleted clusterregistration cleaned/older: a newer registration of the same agent was granted"))
		Expect(out).To(ContainSubstring("deleted clusterregistration cleaned/orphan: its cluster gone is gone"))
		for name, gone := range map[string]bool{"older": true, "orphan": true, "newer": false, "pending": false} {
			_, err := clients.ClusterRegistration().Get(ns, name, metav1.GetOptions{})
			Expect(apierrors.IsNotFound(err)).To(Equal(gone), name)
		}
	})

	It("gitjob deletes GitRepo Jobs that succeeded, and keeps running and failed ones", func(ctx context.Context) {
		kube, err := kubernetes.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		const ns = "jobbed"
		_, err = kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		job := func(name string, done bool) {
			j, err := kube.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{fleet.RepoLabel: "shop"}},
				Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "c", Image: "fleet"}}}}}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			if !done {
				return
			}
			now := metav1.Now()
			j.Status.StartTime, j.Status.CompletionTime, j.Status.Succeeded = &now, &now, 1
			j.Status.Conditions = []batchv1.JobCondition{
				{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: batchv1.JobComplete, Status: corev1.ConditionTrue, LastTransitionTime: now}}
			_, err = kube.BatchV1().Jobs(ns).UpdateStatus(ctx, j, metav1.UpdateOptions{})
			Expect(err).NotTo(HaveOccurred())
		}
		job("shop-done", true)
		job("shop-running", false)
		out, err := testenv.FleetCLI("cleanup", "gitjob", "--kubeconfig", cluster.Kubeconfig)
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring("deleted job jobbed/shop-done: it succeeded (gitrepo shop)"))
		Expect(out).To(ContainSubstring("1 jobs"))
		_, err = kube.BatchV1().Jobs(ns).Get(ctx, "shop-running", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
	})
})
