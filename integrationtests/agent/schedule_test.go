package agent_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func scheduleStatus(name string) fleet.ScheduleStatus {
	s, err := api.Schedule().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	return s.Status
}

// touch makes the manager look at the Schedule again at once (after the clock moved).
func touch(name string) {
	s, err := api.Schedule().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations["test/touched"] = time.Now().String()
	_, err = api.Schedule().Update(s)
	Expect(err).NotTo(HaveOccurred())
}

func clusterStatus() fleet.ClusterStatus {
	c, err := api.Cluster().Get(fleet.DefaultNamespace, clusterName, metav1.GetOptions{})
	Expect(err).NotTo(HaveOccurred())
	return c.Status
}

var _ = Describe("Schedules", func() {
	It("hold a cluster's new deployments outside the window and let them through when it opens", func() {
		// Every day at 12:00 UTC for an hour; the manager's clock reads 10:00.
		day := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
		managerClock.setTo(day.Add(10 * time.Hour))
		DeferCleanup(func() { managerClock.offset.Store(0) })
		_, err := api.Schedule().Create(&fleet.Schedule{ObjectMeta: metav1.ObjectMeta{Name: "noon", Namespace: fleet.DefaultNamespace},
			Spec: fleet.ScheduleSpec{Schedule: "0 0 12 * * *", Duration: metav1.Duration{Duration: time.Hour},
				Targets: fleet.ScheduleTargets{Clusters: []fleet.ScheduleTarget{{Name: "this", ClusterName: clusterName}}}}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() {
			Expect(api.Schedule().Delete(fleet.DefaultNamespace, "noon", nil)).To(Succeed())
			Eventually(func() bool { return clusterStatus().Scheduled }).Should(BeFalse())
		})
		Eventually(func(g Gomega) {
			st := scheduleStatus("noon")
			g.Expect(st.Active).To(BeFalse())
			g.Expect(st.NextStartTime.Time.Equal(day.Add(12*time.Hour))).To(BeTrue(), "next start %s", st.NextStartTime)
			g.Expect(st.MatchingClusters).To(Equal([]string{clusterName}))
			cs := clusterStatus()
			g.Expect(cs.Scheduled).To(BeTrue())
			g.Expect(cs.ActiveSchedule).To(BeFalse())
		}).Should(Succeed())

		name := unique("scheduled")
		newBundle(name, fleet.BundleSpec{Resources: []fleet.BundleResource{res("cm.yaml", configMap(name, "v", "1"))}})
		Eventually(func() bool { d := bd(name); return d != nil && d.Spec.OffSchedule }).Should(BeTrue())
		Consistently(cmData("default", name), 3*time.Second).Should(BeNil(), "nothing is deployed outside the window")

		managerClock.setTo(day.Add(12*time.Hour + 30*time.Minute))
		touch("noon")
		Eventually(func() bool { return scheduleStatus("noon").Active }).Should(BeTrue())
		Eventually(func() bool { return clusterStatus().ActiveSchedule }).Should(BeTrue())
		Eventually(cmData("default", name), 60*time.Second).Should(HaveKeyWithValue("v", "1"), "the window opened: the agent catches up")
		Expect(bd(name).Spec.OffSchedule).To(BeFalse())
	})

	It("say why an expression or time zone is refused", func() {
		for name, s := range map[string]fleet.ScheduleSpec{
			"bad-cron": {Schedule: "at noon", Duration: metav1.Duration{Duration: time.Hour}},
			"bad-zone": {Schedule: "0 12 * * *", Duration: metav1.Duration{Duration: time.Hour}, Location: "Mars/Olympus_Mons"},
		} {
			_, err := api.Schedule().Create(&fleet.Schedule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace}, Spec: s})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { Expect(api.Schedule().Delete(fleet.DefaultNamespace, name, nil)).To(Succeed()) })
		}
		for name, field := range map[string]string{"bad-cron": "spec.schedule", "bad-zone": "spec.location"} {
			Eventually(func(g Gomega) {
				c := fleet.FindCondition(scheduleStatus(name).Conditions, "Accepted")
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(corev1.ConditionFalse))
				g.Expect(c.Message).To(ContainSubstring(field))
			}).Should(Succeed())
		}
		Expect(clusterStatus().Scheduled).To(BeFalse(), "a refused Schedule holds no cluster")
	})
})
