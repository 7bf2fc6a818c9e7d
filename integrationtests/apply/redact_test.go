package apply_test

import (
	"bytes"
	"context"
	"encoding/base64"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/rancher/wrangler/v3/pkg/apply"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/fleetgo/fleet/internal/logfields"
)

// The manager writes Secrets holding credentials (registration values, an imported agent's
// bootstrap Secret, git credentials) through wrangler's apply, which at debug level logs every
// object it patches in full. The manager's and agent's formatter keeps the line and cuts the
// Secret's content.
var _ = Describe("debug logs of wrangler's apply", Serial, func() {
	It("name a patched Secret but hold none of its data", func(ctx context.Context) {
		ns := newNamespace(ctx)
		a, err := apply.NewForConfig(cluster.RESTConfig())
		Expect(err).NotTo(HaveOccurred())
		set := a.WithDynamicLookup().WithSetID("redact-test").WithDefaultNamespace(ns)
		secret := func(token string) *corev1.Secret {
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap", Namespace: ns},
				StringData: map[string]string{"token": token}}
		}

		std := logrus.StandardLogger()
		out, level, formatter := std.Out, std.Level, std.Formatter
		DeferCleanup(func() { std.SetOutput(out); std.SetLevel(level); std.SetFormatter(formatter) })
		var buf bytes.Buffer
		std.SetOutput(&buf)
		std.SetLevel(logrus.DebugLevel)

		// Patch the Secret once with a plain formatter and once with the manager's: the first
		// shows what is at stake (and that this path logs at all), the second that it is cut.
		tokens := []string{"tok-" + rand.String(24), "tok-" + rand.String(24), "tok-" + rand.String(24)}
		Expect(set.ApplyObjects(secret(tokens[0]))).To(Succeed())
		std.SetFormatter(&logrus.TextFormatter{DisableColors: true})
		buf.Reset()
		Expect(set.ApplyObjects(secret(tokens[1]))).To(Succeed())
		Expect(buf.String()).To(ContainSubstring("DesiredSet - Patch /v1, Kind=Secret " + ns + "/bootstrap"))
		Expect(buf.String()).To(ContainSubstring(tokens[1]), "wrangler logs a patched Secret's stringData")

		std.SetFormatter(logfields.Redacting(&logrus.TextFormatter{DisableColors: true}))
		buf.Reset()
		Expect(set.ApplyObjects(secret(tokens[2]))).To(Succeed())
		logged := buf.String()
		Expect(logged).To(ContainSubstring("DesiredSet - Patch /v1, Kind=Secret " + ns + "/bootstrap"))
		Expect(logged).To(ContainSubstring(logfields.Redacted))
		for _, t := range tokens {
			Expect(logged).NotTo(ContainSubstring(t))
			Expect(logged).NotTo(ContainSubstring(base64.StdEncoding.EncodeToString([]byte(t))))
		}

		cs, err := cluster.Clientset()
		Expect(err).NotTo(HaveOccurred())
		s, err := cs.CoreV1().Secrets(ns).Get(ctx, "bootstrap", metav1.GetOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(string(s.Data["token"])).To(Equal(tokens[2]), "the Secret itself is written")
	})
})
