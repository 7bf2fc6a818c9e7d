package sealing

import (
	"bytes"
	"errors"
	"testing"
)

// What is sealed to cluster A's key opens with A's private key, where it was bound, only.
func TestOnlyTheClusterThatMadeTheKeyUnsealsAndOnlyWhereBound(t *testing.T) {
	aPriv, aPub, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	bPriv, _, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	canary := []byte("canary-5f1e0c")
	v, err := Seal(aPub, "cluster-a/web:db-password", map[string][]byte{"password": canary})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(v, canary) {
		t.Fatal("the sealed value holds the plaintext")
	}
	got, err := Unseal(aPriv, "cluster-a/web:db-password", v)
	if err != nil || !bytes.Equal(got["password"], canary) {
		t.Fatalf("A unseals: %v, %q", err, got)
	}
	if _, err := Unseal(bPriv, "cluster-a/web:db-password", v); err == nil {
		t.Fatal("B unsealed A's copy")
	}
	if _, err := Unseal(aPriv, "cluster-a/other:db-password", v); !errors.Is(err, ErrBinding) {
		t.Fatalf("moved elsewhere: %v", err)
	}
	v[len(v)-1] ^= 1
	if _, err := Unseal(aPriv, "cluster-a/web:db-password", v); err == nil {
		t.Fatal("a tampered value unsealed")
	}
	if _, err := Seal("age1notakey", "x", nil); err == nil {
		t.Fatal("sealed to a key that is none")
	}
}
