package controller_test

import (
	"context"
	"io"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/config"
)

func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var _ = Describe("the controller process", func() {
	It("serves health, readiness and metrics", func() {
		Eventually(func() int { code, _ := get("http://" + healthAddr + "/healthz"); return code }).Should(Equal(http.StatusOK))
		Eventually(func() int { code, _ := get("http://" + healthAddr + "/readyz"); return code }).Should(Equal(http.StatusOK))
		code, body := get("http://" + metricsAddr + "/metrics")
		Expect(code).To(Equal(http.StatusOK))
		Expect(body).To(ContainSubstring("go_goroutines"))
		Expect(body).To(ContainSubstring(`workqueue_adds_total{name="fleet.cattle.io/v1alpha1, Kind=Bundle"}`), "the controllers' work queues are measured")
		Expect(body).To(ContainSubstring(`workqueue_depth{name="fleet.cattle.io/v1alpha1, Kind=Cluster"}`))
		Expect(body).To(ContainSubstring("lasso_controller_total_handler_execution"))
	})

	It("reloads its configuration when the fleet-controller ConfigMap changes", func(ctx context.Context) {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: config.ConfigMapName, Namespace: "cattle-fleet-system"},
			Data:       map[string]string{config.Key: `{"apiServerURL":"https://manager.example:6443","agentCheckinInterval":"2s"}`},
		}
		_, err := kube.CoreV1().ConfigMaps("cattle-fleet-system").Create(ctx, cm, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx context.Context) {
			_ = kube.CoreV1().ConfigMaps("cattle-fleet-system").Delete(ctx, cm.Name, metav1.DeleteOptions{})
		})
		Eventually(func() string { return inForce.Get().APIServerURL }).Should(Equal("https://manager.example:6443"))

		// An invalid document is ignored: the configuration in force stays.
		cm.Data[config.Key] = `{"agentCheckinInterval": 5}`
		_, err = kube.CoreV1().ConfigMaps("cattle-fleet-system").Update(ctx, cm, metav1.UpdateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Consistently(func() string { return inForce.Get().APIServerURL }, "1s").Should(Equal("https://manager.example:6443"))
	})
})
