// Package sealing seals a Secret's data to one cluster's own key, so that only the agent of that
// cluster, which made the key and keeps its private half, can read it. A key is an age X25519
// key pair (filippo.io/age); a sealed value is an age file whose plaintext binds the data to
// where it belongs (the BundleDeployment and the Secret's name): moved elsewhere, it does not
// unseal.
package sealing

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"filippo.io/age"
)

// MaxSealed bounds what Unseal reads: a sealed Secret is no larger than a Secret may be.
const MaxSealed = 1 << 20

// NewKey makes a key pair: the private key (AGE-SECRET-KEY-1...) stays in the cluster that
// made it; the public one (age1...) is what the manager seals to.
func NewKey() (private, public string, err error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", "", err
	}
	return id.String(), id.Recipient().String(), nil
}

// sealed is the plaintext of a sealed value.
type sealed struct {
	Bind string            `json:"bind"`
	Data map[string][]byte `json:"data"`
}

// Seal seals data to the public key, bound to bind.
func Seal(public, bind string, data map[string][]byte) ([]byte, error) {
	r, err := age.ParseX25519Recipient(public)
	if err != nil {
		return nil, fmt.Errorf("the cluster's public key: %w", err)
	}
	plain, err := json.Marshal(sealed{Bind: bind, Data: data})
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	w, err := age.Encrypt(&out, r)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(plain); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// ErrBinding is a sealed value unsealed where it does not belong.
var ErrBinding = errors.New("sealed for another place")

// Unseal opens what Seal sealed to the private key's public half, bound to bind.
func Unseal(private, bind string, value []byte) (map[string][]byte, error) {
	id, err := age.ParseX25519Identity(private)
	if err != nil {
		return nil, fmt.Errorf("the cluster's private key: %w", err)
	}
	r, err := age.Decrypt(bytes.NewReader(value), id)
	if err != nil {
		return nil, fmt.Errorf("unsealing: %w", err)
	}
	plain, err := io.ReadAll(io.LimitReader(r, MaxSealed+1))
	if err != nil {
		return nil, fmt.Errorf("unsealing: %w", err)
	}
	if len(plain) > MaxSealed {
		return nil, fmt.Errorf("unsealing: more than %d bytes", MaxSealed)
	}
	var s sealed
	if err := json.Unmarshal(plain, &s); err != nil {
		return nil, fmt.Errorf("unsealing: %w", err)
	}
	if s.Bind != bind {
		return nil, fmt.Errorf("%w: %q, not %q", ErrBinding, s.Bind, bind)
	}
	return s.Data, nil
}

// Binding binds a sealed file to its BundleDeployment (namespace/name) and its name in the
// bundle.
func Binding(namespace, bundleDeployment, file string) string {
	return namespace + "/" + bundleDeployment + ":" + file
}

// Source fingerprints what a sealed file was made from: the file's ciphertext, the public key
// it was sealed to and its binding. The manager seals again only when it changes; the agent
// unseals only a file whose source is the ciphertext its content holds.
func Source(ciphertext []byte, public, bind string) string {
	sum := sha256.Sum256(bytes.Join([][]byte{ciphertext, []byte(public), []byte(bind)}, []byte{0}))
	return hex.EncodeToString(sum[:])
}
