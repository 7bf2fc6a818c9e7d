package sealkey

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/fleetgo/fleet/internal/sealing"
)

// The first start makes the key pair and keeps it; later starts read the same one; what is
// sealed to its public half opens with its private half.
func TestTheKeyIsMadeOnceAndKept(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	priv, pub, err := Ensure(ctx, kube, "cattle-fleet-system")
	if err != nil {
		t.Fatal(err)
	}
	priv2, pub2, err := Ensure(ctx, kube, "cattle-fleet-system")
	if err != nil || priv2 != priv || pub2 != pub {
		t.Fatalf("a second start: %v, same key %v", err, pub2 == pub)
	}
	v, err := sealing.Seal(pub, "b", map[string][]byte{"k": []byte("v")})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sealing.Unseal(priv, "b", v); err != nil || string(got["k"]) != "v" {
		t.Fatalf("unsealing: %v", err)
	}
	_, err = kube.CoreV1().Secrets("other").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := Ensure(ctx, kube, "other"); err == nil {
		t.Fatal("an emptied Secret is taken as a key")
	}
}
