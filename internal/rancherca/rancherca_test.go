package rancherca

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestBundle(t *testing.T) {
	secrets := map[string]*corev1.Secret{}
	get := func(ns, name string) (*corev1.Secret, error) {
		if s, ok := secrets[ns+"/"+name]; ok {
			return s, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	if b, err := Bundle(get); err != nil || b != nil {
		t.Fatalf("no Secrets: %q, %v", b, err)
	}
	secrets["cattle-system/tls-ca"] = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls-ca"}, Data: map[string][]byte{"cacerts.pem": []byte("CA1\n")}}
	if b, _ := Bundle(get); string(b) != "CA1\n" {
		t.Errorf("tls-ca only: %q", b)
	}
	secrets["cattle-system/tls-ca-additional"] = &corev1.Secret{Data: map[string][]byte{"ca-additional.pem": []byte("CA2")}}
	if b, _ := Bundle(get); string(b) != "CA1\nCA2\n" {
		t.Errorf("both: %q", b)
	}
	failing := func(string, string) (*corev1.Secret, error) { return nil, errors.New("boom") }
	if _, err := Bundle(failing); err == nil {
		t.Error("an error reading is reported")
	}
}
