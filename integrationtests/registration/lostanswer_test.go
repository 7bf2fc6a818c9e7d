package registration_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/integrationtests/testenv"
	"github.com/fleetgo/fleet/internal/agent/register"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// answerLosingProxy stands between an agent and the manager's apiserver. The first
// ClusterRegistration the agent sends reaches the apiserver, but its answer is lost (504, as a
// gateway whose wait ran out under load answers); any later one is passed on only once the
// manager has granted the first. Everything else passes through.
type answerLosingProxy struct {
	srv   *httptest.Server
	posts atomic.Int32
	first atomic.Pointer[string]
}

func newAnswerLosingProxy(ctx context.Context) *answerLosingProxy {
	mcfg := manager.RESTConfig()
	upstream, err := url.Parse(mcfg.Host)
	Expect(err).NotTo(HaveOccurred())
	pool := x509.NewCertPool()
	Expect(pool.AppendCertsFromPEM(mcfg.CAData)).To(BeTrue())
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	p := &answerLosingProxy{}
	p.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int32(0)
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/clusterregistrations") {
			n = p.posts.Add(1)
		}
		if n > 1 && !p.firstGranted(ctx, time.Minute) {
			http.Error(w, "the first registration was not granted", http.StatusBadGateway)
			return
		}
		out := r.Clone(ctx)
		out.URL.Scheme, out.URL.Host, out.Host, out.RequestURI = upstream.Scheme, upstream.Host, upstream.Host, ""
		resp, err := transport.RoundTrip(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if n == 1 {
			var created fleet.ClusterRegistration
			if json.Unmarshal(body, &created) == nil && created.Name != "" {
				p.first.Store(&created.Name)
			}
			http.Error(w, "upstream request timeout", http.StatusGatewayTimeout)
			return
		}
		for k, vs := range resp.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, bytes.NewReader(body))
	}))
	DeferCleanup(p.srv.Close)
	return p
}

// firstGranted waits up to d for the manager to grant the first registration.
func (p *answerLosingProxy) firstGranted(ctx context.Context, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if name := p.first.Load(); name != nil {
			reg, err := api.ClusterRegistration().Get(fleet.DefaultNamespace, *name, metav1.GetOptions{})
			if err == nil && reg.Status.Granted {
				return true
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// caPEM is the proxy's certificate, as a registration token's apiServerCA.
func (p *answerLosingProxy) caPEM() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.srv.Certificate().Raw}))
}

var _ = Describe("an agent whose registration request reached the manager but whose answer was lost", func() {
	It("asks again for the same registration, not a second one the first one's grant would lock out, and is registered", func(ctx context.Context) {
		const id, ns = "lost-answer-client", "lost-answer-agent"
		proxy := newAnswerLosingProxy(ctx)
		v := newToken("lost-answer-token", 0)
		v.APIServerURL, v.APIServerCA = proxy.srv.URL, proxy.caPEM()
		kube := clientsetOf(downstreams[1])
		bootstrap(kube, ns, v, nil)
		DeferCleanup(func() {
			_ = api.Cluster().Delete(fleet.DefaultNamespace, registration.ClusterName(id), &metav1.DeleteOptions{})
		})

		obtainCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		cred, err := register.Obtain(obtainCtx, kube, register.Options{Namespace: ns, ClientID: id, PollInterval: 200 * time.Millisecond})
		Expect(err).NotTo(HaveOccurred(), "the agent is registered")
		Expect(proxy.posts.Load()).To(BeNumerically(">=", 2), "the lost answer made the agent ask again")
		Expect(cred.ClusterName).To(Equal(registration.ClusterName(id)))

		By("one registration for the clientID, granted, and nothing refused")
		regs, err := api.ClusterRegistration().List(fleet.DefaultNamespace, metav1.ListOptions{})
		Expect(err).NotTo(HaveOccurred())
		var mine []string
		for _, r := range regs.Items {
			if r.Spec.ClientID == id {
				mine = append(mine, r.Name)
				Expect(r.Status.Granted).To(BeTrue(), r.Name)
			}
		}
		Expect(mine).To(Equal([]string{*proxy.first.Load()}))
		ev, err := testenv.Events(ctx, managerKube, fleet.DefaultNamespace, "Cluster", registration.ClusterName(id))
		Expect(err).NotTo(HaveOccurred())
		Expect(ev["RegistrationRefused"]).To(BeEmpty())

		By("the agent holds the registration key of that grant, for its next registration")
		c, err := api.Cluster().Get(fleet.DefaultNamespace, registration.ClusterName(id), metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.Annotations[registration.KeyHashAnnotation]).To(Equal(registration.KeyHash(cred.RegistrationKey)))
		_, err = kube.CoreV1().Secrets(ns).Get(ctx, registration.BootstrapSecret, metav1.GetOptions{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the token, and the pending request's nonce with it, are gone")
	})
})
