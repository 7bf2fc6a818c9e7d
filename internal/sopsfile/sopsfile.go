// Package sopsfile recognises SOPS-encrypted files in a bundle and decrypts them, in memory, with
// the keys an admin gave the manager: age identities and OpenPGP private keys, nothing else (no
// key from the environment, the home directory, a gpg agent or a cloud KMS). The file's MAC is
// checked: a tampered file does not decrypt.
package sopsfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/ProtonMail/go-crypto/openpgp/armor"
	"github.com/getsops/sops/v3"
	"github.com/getsops/sops/v3/aes"
	sopsage "github.com/getsops/sops/v3/age"
	"github.com/getsops/sops/v3/cmd/sops/common"
	"github.com/getsops/sops/v3/cmd/sops/formats"
	"github.com/getsops/sops/v3/config"
	"github.com/getsops/sops/v3/keyservice"
	"sigs.k8s.io/yaml"
)

// Keys decrypt SOPS files: age identities (AGE-SECRET-KEY-1...) and armored OpenPGP private
// keys (unencrypted: no passphrase is asked).
type Keys struct {
	Age []string
	PGP [][]byte
}

// formatOf is a file's SOPS format, by its name as SOPS chooses it: YAML, JSON, dotenv, INI,
// or the whole file (binary).
func formatOf(name string) formats.Format {
	return formats.FormatForPath(name)
}

// Is reports whether data, the file name of a bundle, is SOPS-encrypted: its SOPS metadata
// (version and MAC) are where SOPS writes them for its format.
func Is(name string, data []byte) bool {
	if !bytes.Contains(data, []byte("sops")) {
		return false // most files, at the cost of one scan
	}
	switch formatOf(name) {
	case formats.Dotenv, formats.Ini:
		return bytes.Contains(data, []byte("sops_version")) && bytes.Contains(data, []byte("sops_mac"))
	}
	var doc struct {
		Sops struct {
			Version string `json:"version"`
			MAC     string `json:"mac"`
		} `json:"sops"`
	}
	if formatOf(name) == formats.Binary && !bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		return false
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return false
	}
	return doc.Sops.Version != "" && doc.Sops.MAC != ""
}

// Decrypt decrypts data, the SOPS file name, with keys; the cleartext is the file as SOPS
// would write it decrypted. Its errors name the file and the reason, never a value.
func Decrypt(name string, data []byte, keys Keys) ([]byte, error) {
	store := common.StoreForFormat(formatOf(name), config.NewStoresConfig())
	tree, err := store.LoadEncryptedFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not a SOPS file: %w", name, err)
	}
	srv, err := newServer(keys)
	if err != nil {
		return nil, fmt.Errorf("%s: the decryption keys: %w", name, err)
	}
	key, err := tree.Metadata.GetDataKeyWithKeyServices([]keyservice.KeyServiceClient{keyservice.NewCustomLocalClient(srv)}, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: no key given to the manager decrypts it (its recipients: %s)", name, strings.Join(recipients(tree.Metadata.KeyGroups), ", "))
	}
	cipher := aes.NewCipher()
	mac, err := tree.Decrypt(key, cipher)
	if err != nil {
		return nil, fmt.Errorf("%s: decrypting: %w", name, redacted(err))
	}
	want, err := cipher.Decrypt(tree.Metadata.MessageAuthenticationCode, key, tree.Metadata.LastModified.Format(time.RFC3339))
	if err != nil || want != mac {
		return nil, fmt.Errorf("%s: %w", name, ErrMAC)
	}
	return store.EmitPlainFile(tree.Branches)
}

// ErrMAC is a file whose content does not match its MAC: changed since SOPS wrote it.
var ErrMAC = errors.New("the MAC does not match: the file was changed after SOPS encrypted it")

// redacted keeps an error of decrypting a value from repeating the value.
func redacted(err error) error {
	return errors.New(strings.SplitN(err.Error(), ":", 2)[0])
}

// server is a SOPS key service that decrypts data keys with the given keys only.
type server struct {
	keyservice.UnimplementedKeyServiceServer
	age sopsage.ParsedIdentities
	pgp openpgp.EntityList
}

func newServer(keys Keys) (*server, error) {
	s := &server{}
	if err := s.age.Import(keys.Age...); err != nil {
		return nil, fmt.Errorf("age: %w", err)
	}
	for i, k := range keys.PGP {
		ring, err := openpgp.ReadArmoredKeyRing(bytes.NewReader(k))
		if err != nil {
			return nil, fmt.Errorf("pgp key %d: %w", i+1, err)
		}
		s.pgp = append(s.pgp, ring...)
	}
	return s, nil
}

func (s *server) Encrypt(context.Context, *keyservice.EncryptRequest) (*keyservice.EncryptResponse, error) {
	return nil, errors.New("the manager encrypts nothing with SOPS keys")
}

func (s *server) Decrypt(_ context.Context, req *keyservice.DecryptRequest) (*keyservice.DecryptResponse, error) {
	var out []byte
	var err error
	switch k := req.Key.KeyType.(type) {
	case *keyservice.Key_AgeKey:
		if len(s.age) == 0 {
			return nil, errors.New("no age key")
		}
		mk := &sopsage.MasterKey{Recipient: k.AgeKey.Recipient, EncryptedKey: string(req.Ciphertext)}
		s.age.ApplyToMasterKey(mk)
		out, err = mk.Decrypt()
	case *keyservice.Key_PgpKey:
		out, err = s.openPGP(req.Ciphertext)
	default:
		err = fmt.Errorf("a %T key: only age and PGP keys are used", k)
	}
	if err != nil {
		return nil, err
	}
	return &keyservice.DecryptResponse{Plaintext: out}, nil
}

func (s *server) openPGP(ciphertext []byte) ([]byte, error) {
	if len(s.pgp) == 0 {
		return nil, errors.New("no PGP key")
	}
	block, err := armor.Decode(bytes.NewReader(ciphertext))
	if err != nil {
		return nil, err
	}
	md, err := openpgp.ReadMessage(block.Body, s.pgp, nil, nil)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(io.LimitReader(md.UnverifiedBody, 1<<10))
}

// recipients names a file's keys, for an error: age recipients and PGP fingerprints.
func recipients(groups []sops.KeyGroup) []string {
	var out []string
	for _, g := range groups {
		for _, k := range g {
			out = append(out, k.TypeToIdentifier()+" "+k.ToString())
		}
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}
