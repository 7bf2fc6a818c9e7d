package registration_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/releaseutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/cli/install"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfactory "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
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

// askFor creates, with regs (a token holder's client), a ClusterRegistration for clientID with
// nonce random, presenting key when set.
func askFor(regs fleetcontrollers.ClusterRegistrationClient, clientID, random, key string) *fleet.ClusterRegistration {
	GinkgoHelper()
	reg := &fleet.ClusterRegistration{ObjectMeta: metav1.ObjectMeta{GenerateName: "request-", Namespace: fleet.DefaultNamespace},
		Spec: fleet.ClusterRegistrationSpec{ClientID: clientID, ClientRandom: random}}
	if key != "" {
		reg.Annotations = map[string]string{registration.KeyAnnotation: key}
	}
	reg, err := regs.Create(reg)
	Expect(err).NotTo(HaveOccurred())
	return reg
}

// granted says whether the manager granted reg.
func granted(reg *fleet.ClusterRegistration) func() bool {
	return func() bool {
		got, err := api.ClusterRegistration().Get(reg.Namespace, reg.Name, metav1.GetOptions{})
		return err == nil && got.Status.Granted
	}
}

var _ = Describe("a registration for a Cluster whose agent checks in", func() {
	It("is held while the agent is live and granted once an admin allows it; after that only with the registration key the grant gave, Offline or not", func(ctx context.Context) {
		const id = "held-client-id"
		v := newToken("held-token", 0)
		// The token holder's own credential: all it may do is create ClusterRegistrations.
		holder, err := fleetfactory.NewFactoryFromConfig(&rest.Config{Host: v.APIServerURL, BearerToken: v.Token,
			TLSClientConfig: rest.TLSClientConfig{CAData: []byte(v.APIServerCA)}})
		Expect(err).NotTo(HaveOccurred())
		regs := holder.Fleet().V1alpha1().ClusterRegistration()
		_, err = api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: fleet.DefaultNamespace},
			Spec: fleet.ClusterSpec{ClientID: id}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = api.Cluster().Delete(fleet.DefaultNamespace, "held", &metav1.DeleteOptions{}) })
		seen := func(at time.Time) {
			Eventually(func() error {
				c, err := api.Cluster().Get(fleet.DefaultNamespace, "held", metav1.GetOptions{})
				if err != nil {
					return err
				}
				c.Status.Agent.LastSeen = metav1.NewTime(at)
				_, err = api.Cluster().UpdateStatus(c)
				return err
			}).Should(Succeed())
		}
		// Its agent checks in: last seen ahead of the clock, so it stays live throughout. The
		// manager has seen the check-in once it takes the Cluster's identity over (a Cluster an
		// agent checks in as without one).
		seen(time.Now().Add(time.Hour))
		Eventually(func() string {
			c, _ := api.Cluster().Get(fleet.DefaultNamespace, "held", metav1.GetOptions{})
			if c == nil {
				return ""
			}
			return c.Annotations[registration.IdentityAnnotation]
		}).ShouldNot(BeEmpty())
		ask := func(random string) *fleet.ClusterRegistration { return askFor(regs, id, random, "") }
		credential := func(random string) error {
			_, err := managerKube.CoreV1().Secrets(fleet.ClustersSystemNamespace).Get(ctx, registration.CredentialSecret(id, random), metav1.GetOptions{})
			return err
		}

		first := ask("first")
		Eventually(func() []string {
			ev, _ := testenv.Events(ctx, managerKube, fleet.DefaultNamespace, "Cluster", "held")
			return ev["RegistrationHeld"]
		}).ShouldNot(BeEmpty())
		Expect(granted(first)()).To(BeFalse())
		Expect(apierrors.IsNotFound(credential("first"))).To(BeTrue(), "no credential for a live Cluster's clientID")

		// An administrator lets the reinstalled agent in: once.
		Eventually(func() error {
			c, err := api.Cluster().Get(fleet.DefaultNamespace, "held", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if c.Annotations == nil {
				c.Annotations = map[string]string{}
			}
			c.Annotations[registration.AllowReregistrationAnnotation] = "true"
			_, err = api.Cluster().Update(c)
			return err
		}).Should(Succeed())
		// (Its credential Secret goes as soon as the Cluster's check-in is later than it, which
		// this one's, ahead of the clock, is at once.)
		Eventually(granted(first)).Should(BeTrue())
		Eventually(func() map[string]string {
			c, _ := api.Cluster().Get(fleet.DefaultNamespace, "held", metav1.GetOptions{})
			return c.Annotations
		}).ShouldNot(HaveKey(registration.AllowReregistrationAnnotation), "the allowance is used up")

		// The grant gave the agent a registration key: the Cluster holds its hash.
		hashOf := func() string {
			c, err := api.Cluster().Get(fleet.DefaultNamespace, "held", metav1.GetOptions{})
			Expect(err).NotTo(HaveOccurred())
			return c.Annotations[registration.KeyHashAnnotation]
		}
		Eventually(hashOf).ShouldNot(BeEmpty())

		// From now on a registration without the key is refused, live or Offline: a token and
		// a clientID no longer take the Cluster over once its agent goes quiet.
		seen(time.Now().Add(time.Hour))
		second := ask("second")
		refusals := func() []string {
			ev, _ := testenv.Events(ctx, managerKube, fleet.DefaultNamespace, "Cluster", "held")
			return ev["RegistrationRefused"]
		}
		Eventually(refusals).Should(ContainElement(ContainSubstring("carries no registration key")))
		seen(time.Now().Add(-time.Hour))
		Consistently(granted(second), "5s").Should(BeFalse(), "an Offline Cluster is not given to a registration without its key")
		Expect(apierrors.IsNotFound(credential("second"))).To(BeTrue())

		// The agent holding the key gets it back at once, even while an agent checks in; the key
		// is then a new one, so the same key is refused afterwards.
		const key = "the-key-given-with-the-last-credential"
		_, err = api.Cluster().Patch(fleet.DefaultNamespace, "held", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+registration.KeyHashAnnotation+`":"`+registration.KeyHash(key)+`"}}}`))
		Expect(err).NotTo(HaveOccurred())
		seen(time.Now().Add(time.Hour))
		Eventually(granted(askFor(regs, id, "third", key))).Should(BeTrue(), "the key proves the registration")
		Eventually(hashOf).ShouldNot(Equal(registration.KeyHash(key)), "a new key with the new credential")
		fourth := askFor(regs, id, "fourth", key)
		Eventually(refusals).Should(ContainElement(ContainSubstring("carries another registration key")))
		Expect(granted(fourth)()).To(BeFalse())
	})
})

var _ = Describe("a registration token made for a cluster group", func() {
	It("gives its Clusters the group's labels and, of the agent's, only keys the token lists that join no other group; its holder cannot claim another token", func(ctx context.Context) {
		const ns = "grouped"
		_, err := managerKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		// As `fleet install agent-token --group north` writes it.
		issue := func(name string, annotations map[string]string) registration.Values {
			_, err := api.ClusterRegistrationToken().Create(&fleet.ClusterRegistrationToken{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations}})
			Expect(err).NotTo(HaveOccurred())
			var v registration.Values
			Eventually(func(g Gomega) {
				s, err := managerKube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(yaml.Unmarshal(s.Data[registration.ValuesKey], &v)).To(Succeed())
			}).Should(Succeed())
			return v
		}
		for group, label := range map[string]string{"north": "region", "prod": "env"} {
			value := map[string]string{"north": "north", "prod": "prod"}[group]
			_, err := api.ClusterGroup().Create(&fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: group, Namespace: ns},
				Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{label: value}}}})
			Expect(err).NotTo(HaveOccurred())
		}
		north := issue("north", map[string]string{registration.ClusterLabelsAnnotation: `{"region":"north"}`})
		issue("open", nil)
		holder, err := fleetfactory.NewFactoryFromConfig(&rest.Config{Host: north.APIServerURL, BearerToken: north.Token,
			TLSClientConfig: rest.TLSClientConfig{CAData: []byte(north.APIServerCA)}})
		Expect(err).NotTo(HaveOccurred())
		ask := func(id string, annotations map[string]string) error {
			_, err := holder.Fleet().V1alpha1().ClusterRegistration().Create(&fleet.ClusterRegistration{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "request-", Namespace: ns, Annotations: annotations},
				Spec:       fleet.ClusterRegistrationSpec{ClientID: id, ClientRandom: "r", ClusterLabels: map[string]string{"region": "south", "env": "prod", "team": "a"}}})
			return err
		}
		labelsOf := func(id string) func(g Gomega) map[string]string {
			return func(g Gomega) map[string]string {
				c, err := api.Cluster().Get(ns, registration.ClusterName(id), metav1.GetOptions{})
				g.Expect(err).NotTo(HaveOccurred())
				return c.Labels
			}
		}
		me := "system:serviceaccount:" + ns + ":" + registration.ImportServiceAccount("north")
		Expect(ask("grouped-a", map[string]string{registration.RequesterAnnotation: me})).To(Succeed())
		// Its group's label and none of the agent's: a clusterSelector cannot be steered by them.
		Eventually(labelsOf("grouped-a")).Should(Equal(map[string]string{"region": "north"}))

		// A token that lists keys (`--label-keys team,env`): of the agent's, those of its keys
		// that join no other group (env=prod would join prod).
		teams := issue("north-teams", map[string]string{registration.ClusterLabelsAnnotation: `{"region":"north"}`,
			registration.ClusterLabelKeysAnnotation: "team,env"})
		teamsHolder, err := fleetfactory.NewFactoryFromConfig(&rest.Config{Host: teams.APIServerURL, BearerToken: teams.Token,
			TLSClientConfig: rest.TLSClientConfig{CAData: []byte(teams.APIServerCA)}})
		Expect(err).NotTo(HaveOccurred())
		_, err = teamsHolder.Fleet().V1alpha1().ClusterRegistration().Create(&fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "request-", Namespace: ns,
				Annotations: map[string]string{registration.RequesterAnnotation: "system:serviceaccount:" + ns + ":" + registration.ImportServiceAccount("north-teams")}},
			Spec: fleet.ClusterRegistrationSpec{ClientID: "grouped-t", ClientRandom: "r", ClusterLabels: map[string]string{"region": "south", "env": "prod", "team": "a", "tier": "gold"}}})
		Expect(err).NotTo(HaveOccurred())
		Eventually(labelsOf("grouped-t")).Should(Equal(map[string]string{"region": "north", "team": "a"}))

		// Claiming the open token's identity is refused by the apiserver.
		err = ask("grouped-b", map[string]string{registration.RequesterAnnotation: "system:serviceaccount:" + ns + ":" + registration.ImportServiceAccount("open")})
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("requested-by must name the user"))

		// Naming no token is no way around it.
		Expect(ask("grouped-c", nil)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(labelsOf("grouped-c")(g)).To(BeEmpty(), "no group's label, none of the agent's")
		}).Should(Succeed())
	})
})

var _ = Describe("a Cluster made ahead of time with spec.clientID, its agent's manifest made by fleet install agent-token --cluster", func() {
	It("is registered only with the key that manifest carries: its clientID and any token are not enough, though it never checked in", func(ctx context.Context) {
		const id = "made-ahead-client-id"
		_, err := api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "made-ahead", Namespace: fleet.DefaultNamespace},
			Spec: fleet.ClusterSpec{ClientID: id}})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = api.Cluster().Delete(fleet.DefaultNamespace, "made-ahead", &metav1.DeleteOptions{}) })
		manifest, err := install.AgentToken(ctx, api, managerKube, install.AgentTokenOptions{Namespace: fleet.DefaultNamespace, Name: "made-ahead-token",
			Cluster: "made-ahead", SystemNamespace: fleet.SystemNamespace, Timeout: time.Minute})
		Expect(err).NotTo(HaveOccurred())
		var boot *corev1.Secret
		for _, doc := range releaseutil.SplitManifests(manifest) {
			s := &corev1.Secret{}
			if yaml.Unmarshal([]byte(doc), s) == nil && s.Kind == "Secret" && s.Name == registration.BootstrapSecret {
				boot = s
			}
		}
		Expect(boot).NotTo(BeNil(), manifest)
		key, token := boot.StringData[registration.KeyRegistrationKey], boot.StringData[registration.KeyToken]
		Expect(key).NotTo(BeEmpty())
		c, err := api.Cluster().Get(fleet.DefaultNamespace, "made-ahead", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Annotations).To(HaveKeyWithValue(registration.KeyHashAnnotation, registration.KeyHash(key)))

		// Anyone holding a token of the namespace (here the very same one) asks without the key.
		holder, err := fleetfactory.NewFactoryFromConfig(&rest.Config{Host: boot.StringData[registration.KeyAPIServerURL], BearerToken: token,
			TLSClientConfig: rest.TLSClientConfig{CAData: []byte(boot.StringData[registration.KeyAPIServerCA])}})
		Expect(err).NotTo(HaveOccurred())
		regs := holder.Fleet().V1alpha1().ClusterRegistration()
		thief := askFor(regs, id, "thief", "")
		Eventually(func() []string {
			ev, _ := testenv.Events(ctx, managerKube, fleet.DefaultNamespace, "Cluster", "made-ahead")
			return ev["RegistrationRefused"]
		}).Should(ContainElement(ContainSubstring("carries no registration key")))
		Expect(granted(thief)()).To(BeFalse())
		Eventually(granted(askFor(regs, id, "agent", key))).Should(BeTrue())
	})
})
