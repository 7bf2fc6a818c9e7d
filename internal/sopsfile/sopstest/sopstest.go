// Package sopstest writes SOPS files for tests, as the sops command does.
package sopstest

import (
	"bytes"
	"crypto/rand"
	"strings"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/cmd/sops/common"
	"github.com/getsops/sops/v3/cmd/sops/formats"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/pgp"
)

// T is what Encrypt reports to: a *testing.T, or Ginkgo's GinkgoT().
type T interface {
	Helper()
	Fatal(args ...any)
}

// Encrypt does what `sops --encrypt --age R --pgp F` does to plain, the file name: the data key
// sealed to the age recipient and the PGP key, the values encrypted, the MAC written.
func Encrypt(t T, name string, plain []byte, recipient string, pgpKey *openpgp.Entity) []byte {
	t.Helper()
	store := common.StoreForFormat(formats.FormatForPath(name), config.NewStoresConfig())
	branches, err := store.LoadPlainFile(plain)
	if err != nil {
		t.Fatal(err)
	}
	group := sops.KeyGroup{}
	dataKey := make([]byte, 32)
	if _, err := rand.Read(dataKey); err != nil {
		t.Fatal(err)
	}
	if recipient != "" {
		k, err := sopsage.MasterKeyFromRecipient(recipient)
		if err != nil {
			t.Fatal(err)
		}
		if err := k.Encrypt(dataKey); err != nil {
			t.Fatal(err)
		}
		group = append(group, k)
	}
	if pgpKey != nil {
		var buf bytes.Buffer
		aw, _ := armor.Encode(&buf, "PGP MESSAGE", nil)
		w, err := openpgp.Encrypt(aw, []*openpgp.Entity{pgpKey}, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = w.Write(dataKey)
		_ = w.Close()
		_ = aw.Close()
		group = append(group, &pgp.MasterKey{Fingerprint: strings.ToUpper(pgpKey.PrimaryKey.KeyIdString()), EncryptedKey: buf.String()})
	}
	tree := sops.Tree{Branches: branches, Metadata: sops.Metadata{KeyGroups: []sops.KeyGroup{group},
		UnencryptedSuffix: sops.DefaultUnencryptedSuffix, Version: "3.13.3"}}
	if err := common.EncryptTree(common.EncryptTreeOpts{Tree: &tree, Cipher: aes.NewCipher(), DataKey: dataKey}); err != nil {
		t.Fatal(err)
	}
	out, err := store.EmitEncryptedFile(tree)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
