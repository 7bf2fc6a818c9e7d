package agent_test

import (
	"context"
	"fmt"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

var seq atomic.Int32

// unique returns a fresh name for a bundle or downstream namespace.
func unique(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// res is a bundle file.
func res(name, content string) fleet.BundleResource {
	return fleet.BundleResource{Name: name, Content: content}
}

func configMap(name string, data ...string) string {
	s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\ndata:\n"
	for i := 0; i+1 < len(data); i += 2 {
		s += "  " + data[i] + ": \"" + data[i+1] + "\"\n"
	}
	if len(data) == 0 {
		s += "  a: \"1\"\n"
	}
	return s
}

func deployment(name, nodeSelector string) string {
	s := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
spec:
  replicas: 1
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `}
    spec:
      containers:
      - name: app
        image: example.com/app:1
`
	if nodeSelector != "" {
		s += "      nodeSelector: {" + nodeSelector + "}\n"
	}
	return s
}

// newBundle creates a Bundle on the manager targeting the downstream cluster and deletes it
// after the spec.
func newBundle(name string, spec fleet.BundleSpec) {
	if len(spec.Targets) == 0 {
		spec.Targets = []fleet.BundleTarget{{ClusterName: clusterName}}
	}
	_, err := api.Bundle().Create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleet.DefaultNamespace}, Spec: spec})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		err := api.Bundle().Delete(fleet.DefaultNamespace, name, nil)
		if err != nil && !apierrors.IsNotFound(err) {
			Expect(err).NotTo(HaveOccurred())
		}
	})
}

func updateBundle(name string, mutate func(*fleet.Bundle)) {
	Expect(testenv.UpdateBundle(api, fleet.DefaultNamespace, name, mutate)).To(Succeed())
}

// bd returns the BundleDeployment of a bundle on the downstream cluster (nil while missing).
func bd(name string) *fleet.BundleDeployment {
	b, err := api.BundleDeployment().Get(clusterNS, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return b
}

// state is the BundleDeployment's state as the agent reported it ("" while it is missing), for
// Eventually.
func state(name string) func() string {
	return func() string {
		if b := bd(name); b != nil {
			return b.Status.Display.State
		}
		return ""
	}
}

// readyAndCurrent waits until the agent reported the bundle's current deploymentID Ready.
func readyAndCurrent(name string) *fleet.BundleDeployment {
	var out *fleet.BundleDeployment
	Eventually(func(g Gomega) {
		b := bd(name)
		g.Expect(b).NotTo(BeNil())
		g.Expect(b.Spec.DeploymentID).NotTo(BeEmpty())
		g.Expect(b.Status.AppliedDeploymentID).To(Equal(b.Spec.DeploymentID))
		g.Expect(b.Status.Display.State).To(Equal(string(fleet.Ready)), "status: %+v", b.Status)
		out = b
	}).Should(Succeed())
	return out
}

// cmData reads a downstream ConfigMap's data (nil while missing).
func cmData(ns, name string) func() map[string]string {
	return func() map[string]string {
		cm, err := local.CoreV1().ConfigMaps(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		Expect(err).NotTo(HaveOccurred())
		if cm.Data == nil {
			return map[string]string{}
		}
		return cm.Data
	}
}

func condition(b *fleet.BundleDeployment, t string) *corev1.ConditionStatus {
	for _, c := range b.Status.Conditions {
		if c.Type == t {
			s := c.Status
			return &s
		}
	}
	return nil
}
