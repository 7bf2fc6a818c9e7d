package registration_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var _ = Describe("importing a cluster through a tenant's kubeconfig", func() {
	It("runs no credential plugin and reads no file of the manager's that the kubeconfig names", func(ctx context.Context) {
		// The kubeconfig's server is the attacker's: it records every Authorization header.
		var mu sync.Mutex
		var seen []string
		server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Header.Get("Authorization"))
			mu.Unlock()
			http.Error(w, "no", http.StatusInternalServerError)
		}))
		DeferCleanup(server.Close)
		dir := GinkgoT().TempDir()
		// A file of the manager's host, as its service-account token would be.
		secretFile := filepath.Join(dir, "token")
		Expect(os.WriteFile(secretFile, []byte("the-managers-own-token"), 0o600)).To(Succeed())
		marker := filepath.Join(dir, "exec-ran")
		kubeconfig := func(user string) []byte {
			return []byte(`apiVersion: v1
kind: Config
current-context: c
contexts:
- name: c
  context: {cluster: k, user: u}
clusters:
- name: k
  cluster:
    server: ` + server.URL + `
    insecure-skip-tls-verify: true
users:
- name: u
  user:
` + user)
		}
		attacks := map[string][]byte{
			"exec": kubeconfig(`    exec:
      apiVersion: client.authentication.k8s.io/v1
      interactiveMode: Never
      command: /bin/sh
      args: ["-c", "touch ` + marker + `; echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'"]
`),
			"tokenFile": kubeconfig("    tokenFile: " + secretFile + "\n"),
		}
		for field, kc := range attacks {
			name := "import-" + map[string]string{"exec": "exec", "tokenFile": "tokenfile"}[field]
			_, err := managerKube.CoreV1().Secrets(fleet.DefaultNamespace).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace},
				Data:       map[string][]byte{"value": kc}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace},
				Spec: fleet.ClusterSpec{KubeConfigSecret: name, AgentNamespace: name}})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(func() { _ = api.Cluster().Delete(fleet.DefaultNamespace, name, &metav1.DeleteOptions{}) })
			Eventually(func(g Gomega) {
				c, err := api.Cluster().Get(fleet.DefaultNamespace, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				cond := fleet.FindCondition(c.Status.Conditions, "Imported")
				g.Expect(cond).NotTo(BeNil())
				g.Expect(cond.Status).To(Equal(corev1.ConditionFalse))
				g.Expect(cond.Message).To(ContainSubstring("users[u]." + field))
				g.Expect(cond.Message).To(ContainSubstring("accepts only inline credentials"))
			}).Should(Succeed(), field)
		}
		_, err := os.Stat(marker)
		Expect(os.IsNotExist(err)).To(BeTrue(), "the exec plugin ran inside the manager")
		mu.Lock()
		defer mu.Unlock()
		Expect(seen).To(BeEmpty(), "the manager reached the kubeconfig's server")
	})
})
