package helmdeployer

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fleetgo/fleet/internal/bundlereader"
)

func record(t *testing.T, size int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	chunk := make([]byte, 1<<20)
	for left := size; left > 0; left -= len(chunk) {
		if _, err := zw.Write(chunk[:min(left, len(chunk))]); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return []byte(base64.StdEncoding.EncodeToString(buf.Bytes()))
}

// A release Secret whose record is a gzip bomb never reaches Helm's decoder: a Get fails naming
// it, a List leaves it out.
func TestBoundedSecretsLeaveBombsOut(t *testing.T) {
	labels := map[string]string{"owner": "helm", "name": "app"}
	kube := fake.NewSimpleClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.app.v1", Namespace: "ns", Labels: labels},
			Data: map[string][]byte{"release": record(t, 1024)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.app.v2", Namespace: "ns", Labels: labels},
			Data: map[string][]byte{"release": record(t, bundlereader.MaxDecompressed+1)}},
	)
	b := boundedSecrets{kube.CoreV1().Secrets("ns")}
	ctx := context.Background()
	if _, err := b.Get(ctx, "sh.helm.release.v1.app.v1", metav1.GetOptions{}); err != nil {
		t.Fatalf("a small record: %v", err)
	}
	if _, err := b.Get(ctx, "sh.helm.release.v1.app.v2", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "expands to more than") {
		t.Fatalf("the bomb: %v", err)
	}
	l, err := b.List(ctx, metav1.ListOptions{LabelSelector: "owner=helm"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "sh.helm.release.v1.app.v1" {
		t.Fatalf("list: %v %v", l, err)
	}
}
