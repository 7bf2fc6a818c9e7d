package e2e_test

import (
	"context"
	"encoding/base64"
	"os"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/controller/bootstrap"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// After the whole run, the debug logs of the controller and of every agent hold none of the
// secrets they handled: the registration tokens, the agents' credentials, the git password,
// neither as they are nor base64-encoded.
var _ = AfterSuite(func(ctx context.Context) {
	secrets := map[string]string{"the git password": gitPassword}
	tokens, err := api.ClusterRegistrationToken().List("", metav1.ListOptions{})
	Expect(err).NotTo(HaveOccurred())
	for _, t := range tokens.Items {
		if t.Status.SecretName == "" {
			continue
		}
		s, err := managerKube.CoreV1().Secrets(t.Namespace).Get(ctx, t.Status.SecretName, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		var values registration.Values
		Expect(yaml.Unmarshal(s.Data[registration.ValuesKey], &values)).To(Succeed())
		secrets["registration token "+t.Namespace+"/"+t.Name] = values.Token
	}
	for name, c := range map[string]struct {
		kube kubernetes.Interface
		ns   string
	}{"local": {managerKube, bootstrap.LocalAgentNamespace}, "dev": {dev.kube, fleet.SystemNamespace}, "prod": {prod.kube, fleet.SystemNamespace}} {
		s, err := c.kube.CoreV1().Secrets(c.ns).Get(ctx, registration.AgentSecret, metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred(), name)
		secrets["the agent credential of "+name] = string(s.Data[registration.KeyToken])
	}
	Expect(len(secrets)).To(BeNumerically(">=", 5), "the git password, two tokens, three credentials")
	for _, f := range processes {
		raw, err := os.ReadFile(f.p.LogPath())
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.Count(string(raw), "level=debug")).To(BeNumerically(">", 0), "%s logs at debug level", f.name)
		for what, value := range secrets {
			Expect(value).NotTo(BeEmpty(), what)
			Expect(strings.Contains(string(raw), value)).To(BeFalse(), "%s's log holds %s", f.name, what)
			// As a Secret's data holds it, too.
			encoded := base64.StdEncoding.EncodeToString([]byte(value))
			Expect(strings.Contains(string(raw), encoded)).To(BeFalse(), "%s's log holds %s, base64-encoded", f.name, what)
		}
	}
})
