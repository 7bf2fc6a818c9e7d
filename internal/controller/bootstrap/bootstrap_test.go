package bootstrap

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

func TestLocalKubeconfigFollowsTheManagersToken(t *testing.T) {
	ctx := context.Background()
	tokenFile := filepath.Join(t.TempDir(), "token")
	cfg := &rest.Config{Host: "https://10.96.0.1:443", BearerTokenFile: tokenFile,
		TLSClientConfig: rest.TLSClientConfig{CAData: []byte("ca")}}
	kube := fake.NewSimpleClientset()
	token := func() string {
		s, err := kube.CoreV1().Secrets("cattle-fleet-system").Get(ctx, LocalKubeconfigSecret, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kc, err := clientcmd.RESTConfigFromKubeConfig(s.Data["value"])
		if err != nil {
			t.Fatal(err)
		}
		if string(s.Data["apiServerURL"]) != cfg.Host || kc.Host != cfg.Host {
			t.Fatalf("server: %s, %s", s.Data["apiServerURL"], kc.Host)
		}
		return kc.BearerToken
	}

	if err := os.WriteFile(tokenFile, []byte("first\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := localKubeconfig(ctx, "cattle-fleet-system", cfg, kube); err != nil {
		t.Fatal(err)
	}
	if got := token(); got != "first" {
		t.Fatalf("token %q", got)
	}
	// A restart with a rotated token updates the Secret it wrote.
	if err := os.WriteFile(tokenFile, []byte("second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := localKubeconfig(ctx, "cattle-fleet-system", cfg, kube); err != nil {
		t.Fatal(err)
	}
	if got := token(); got != "second" {
		t.Fatalf("token after restart %q", got)
	}

	// A Secret a user made is theirs.
	mine := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: LocalKubeconfigSecret, Namespace: "cattle-fleet-system"},
		Data: map[string][]byte{"value": []byte("user's")}}
	kube = fake.NewSimpleClientset(mine)
	if err := localKubeconfig(ctx, "cattle-fleet-system", cfg, kube); err != nil {
		t.Fatal(err)
	}
	s, _ := kube.CoreV1().Secrets("cattle-fleet-system").Get(ctx, LocalKubeconfigSecret, metav1.GetOptions{})
	if string(s.Data["value"]) != "user's" {
		t.Fatal("a user's local-cluster Secret is left alone")
	}
}
