package sopsfile

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"filippo.io/age"
	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"

	"github.com/fleetgo/fleet/internal/sopsfile/sopstest"
)

const secretYAML = `apiVersion: v1
kind: Secret
metadata:
  name: db
stringData:
  password: canary-7d1c9e
`

func TestDecryptsWithTheGivenAgeOrPGPKeyOnly(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	other, _ := age.GenerateX25519Identity()
	entity, err := openpgp.NewEntity("fleet test", "", "test@example.com", nil)
	if err != nil {
		t.Fatal(err)
	}
	var priv bytes.Buffer
	aw, _ := armor.Encode(&priv, openpgp.PrivateKeyType, nil)
	if err := entity.SerializePrivate(aw, nil); err != nil {
		t.Fatal(err)
	}
	_ = aw.Close()
	for _, name := range []string{"db.yaml", "db.json", "db.env", "db.bin"} {
		plain := []byte(secretYAML)
		switch name {
		case "db.json":
			plain = []byte(`{"password": "canary-7d1c9e"}`)
		case "db.env":
			plain = []byte("password=canary-7d1c9e\n")
		case "db.bin":
			plain = []byte("whole file: canary-7d1c9e")
		}
		enc := sopstest.Encrypt(t, name, plain, id.Recipient().String(), entity)
		if bytes.Contains(enc, []byte("canary-7d1c9e")) || !Is(name, enc) || Is(name, plain) {
			t.Fatalf("%s: encrypted %v, plain %v, or the canary shows:\n%s", name, Is(name, enc), Is(name, plain), enc)
		}
		for what, keys := range map[string]Keys{"age": {Age: []string{id.String()}}, "pgp": {PGP: [][]byte{priv.Bytes()}}} {
			got, err := Decrypt(name, enc, keys)
			if err != nil || !bytes.Contains(got, []byte("canary-7d1c9e")) {
				t.Errorf("%s with the %s key: %v\n%s", name, what, err, got)
			}
		}
		_, err := Decrypt(name, enc, Keys{Age: []string{other.String()}})
		if err == nil || !strings.HasPrefix(err.Error(), name+": no key given to the manager decrypts it (its recipients: ") ||
			!strings.Contains(err.Error(), "age "+id.Recipient().String()) {
			t.Errorf("%s with another key: %v", name, err)
		}
		if _, err := Decrypt(name, enc, Keys{}); err == nil {
			t.Errorf("%s with no key (the environment's are not used) decrypted", name)
		}
	}
}

// A value changed in the file (another value's ciphertext swapped in) fails the MAC.
func TestATamperedFileDoesNotDecrypt(t *testing.T) {
	id, _ := age.GenerateX25519Identity()
	plain := []byte("a: one\nb: two\n")
	enc := sopstest.Encrypt(t, "s.yaml", plain, id.Recipient().String(), nil)
	lines := strings.Split(string(enc), "\n")
	va, vb := strings.TrimPrefix(lines[0], "a: "), strings.TrimPrefix(lines[1], "b: ")
	lines[0], lines[1] = "a: "+vb, "b: "+va
	_, err := Decrypt("s.yaml", []byte(strings.Join(lines, "\n")), Keys{Age: []string{id.String()}})
	if err == nil || strings.Contains(err.Error(), "one") || strings.Contains(err.Error(), "two") {
		t.Fatalf("swapped values: %v", err)
	}
	if !strings.Contains(err.Error(), "s.yaml: decrypting") {
		t.Fatalf("not named: %v", err)
	}
	// A value left in clear (the _unencrypted suffix) is under the MAC all the same.
	enc = sopstest.Encrypt(t, "s.yaml", []byte("a: one\nreplicas_unencrypted: 3\n"), id.Recipient().String(), nil)
	enc = bytes.Replace(enc, []byte("replicas_unencrypted: 3"), []byte("replicas_unencrypted: 4"), 1)
	if _, err := Decrypt("s.yaml", enc, Keys{Age: []string{id.String()}}); !errors.Is(err, ErrMAC) {
		t.Fatalf("a changed clear value: %v", err)
	}
}
