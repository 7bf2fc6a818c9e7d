// Package ocistorage keeps Bundles' contents in an OCI registry instead of Contents on the
// manager (Fleet's OCI content storage): `fleet apply` pushes a bundle's manifest as an artifact
// tagged with its content ID, the Bundle names it (spec.contentsId) and holds no resources, and
// each agent pulls it with the registry's agent credentials. The registry is described by a
// Secret of type fleet.cattle.io/bundle-oci-storage/v1alpha1. Contents Fleet pushed, in its
// own layout, are read too (Pull), so Bundles moved from Fleet deploy as they are.
package ocistorage

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"oras.land/oras-go/v2"
	"oras.land/oras-go/v2/content"
	"oras.land/oras-go/v2/content/memory"
	"oras.land/oras-go/v2/errdef"
	"oras.land/oras-go/v2/registry/remote"
	"oras.land/oras-go/v2/registry/remote/auth"
	"oras.land/oras-go/v2/registry/remote/retry"
)

// SecretType is the type of a Secret describing the registry; DefaultSecretName the Secret a
// GitRepo naming no ociRegistrySecret uses when its namespace has one (as on Fleet).
const (
	SecretType        = "fleet.cattle.io/bundle-oci-storage/v1alpha1"
	DefaultSecretName = "ocistorage"
)

// Keys of the Secret.
const (
	KeyReference     = "reference"
	KeyUsername      = "username"
	KeyPassword      = "password"
	KeyAgentUsername = "agentUsername"
	KeyAgentPassword = "agentPassword"
	KeyInsecure      = "insecure"
	KeyBasicHTTP     = "basicHTTP"
)

// Media types of the artifact: a bundle's manifest, gzipped JSON {"resources": [...]}, as a
// Content holds it.
const (
	ArtifactType      = "application/vnd.fleet.bundle.v1"
	ManifestMediaType = "application/vnd.fleet.bundle.manifest.v1+gzip"
)

// AgentSecretName is the Secret, next to a BundleDeployment whose contents a registry keeps
// (spec.ociContents), that its agent pulls them with (AgentData): the manager writes it.
func AgentSecretName(bundleDeployment string) string { return bundleDeployment + "-oci-storage" }

// Storage is a registry repository holding bundle contents.
type Storage struct {
	// Reference is the repository, host[:port]/path.
	Reference string
	// Username and Password push (the manager's); AgentUsername and AgentPassword pull.
	Username, Password           string
	AgentUsername, AgentPassword string
	// Insecure skips TLS verification; BasicHTTP talks plain HTTP.
	Insecure, BasicHTTP bool
}

// FromSecret reads a Storage from a Secret's data.
func FromSecret(data map[string][]byte) (Storage, error) {
	s := Storage{Reference: strings.TrimPrefix(string(data[KeyReference]), "oci://"),
		Username: string(data[KeyUsername]), Password: string(data[KeyPassword]),
		AgentUsername: string(data[KeyAgentUsername]), AgentPassword: string(data[KeyAgentPassword])}
	if s.Reference == "" {
		return s, fmt.Errorf("key %s is empty", KeyReference)
	}
	for key, dst := range map[string]*bool{KeyInsecure: &s.Insecure, KeyBasicHTTP: &s.BasicHTTP} {
		if v := string(data[key]); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return s, fmt.Errorf("key %s: %q is not a boolean", key, v)
			}
			*dst = b
		}
	}
	return s, nil
}

// AgentData is the Secret data an agent pulls with: the agent's credentials (the pushing ones
// when the Secret has none for agents), never the manager's otherwise.
func (s Storage) AgentData() map[string][]byte {
	user, pass := s.AgentUsername, s.AgentPassword
	if user == "" && pass == "" {
		user, pass = s.Username, s.Password
	}
	return map[string][]byte{KeyReference: []byte(s.Reference), KeyUsername: []byte(user), KeyPassword: []byte(pass),
		KeyInsecure: []byte(strconv.FormatBool(s.Insecure)), KeyBasicHTTP: []byte(strconv.FormatBool(s.BasicHTTP))}
}

// Ref is where the contents of id are: reference:id.
func (s Storage) Ref(id string) string { return s.Reference + ":" + id }

func (s Storage) repository(reference, user, pass string) (*remote.Repository, error) {
	repo, err := remote.NewRepository(reference)
	if err != nil {
		return nil, fmt.Errorf("oci storage reference %q: %w", reference, err)
	}
	repo.PlainHTTP = s.BasicHTTP
	base := http.DefaultTransport.(*http.Transport).Clone()
	if s.Insecure {
		base.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // asked for with insecure
	}
	client := &auth.Client{Client: &http.Client{Transport: retry.NewTransport(base)}, Cache: auth.NewCache()}
	if user != "" || pass != "" {
		client.Credential = auth.StaticCredential(repo.Reference.Registry, auth.Credential{Username: user, Password: pass})
	}
	repo.Client = client
	return repo, nil
}

// Push stores manifest (gzipped) as the contents of id.
func (s Storage) Push(ctx context.Context, id string, manifest []byte) error {
	repo, err := s.repository(s.Reference, s.Username, s.Password)
	if err != nil {
		return err
	}
	store := memory.New()
	layer, err := oras.PushBytes(ctx, store, ManifestMediaType, manifest)
	if err != nil {
		return err
	}
	desc, err := oras.PackManifest(ctx, store, oras.PackManifestVersion1_1, ArtifactType, oras.PackManifestOptions{Layers: []ocispec.Descriptor{layer}})
	if err != nil {
		return err
	}
	if err := store.Tag(ctx, desc, id); err != nil {
		return err
	}
	if _, err := oras.Copy(ctx, store, id, repo, id, oras.DefaultCopyOptions); err != nil {
		return fmt.Errorf("pushing %s: %w", s.Ref(id), err)
	}
	return nil
}

// Pull returns the manifest (gzipped) stored as the contents of id, with the credentials of the
// pushing side (the agent's Storage holds the agent's). Contents Fleet pushed (FleetRef) are read
// when the registry has none of ours for id.
func (s Storage) Pull(ctx context.Context, id string) ([]byte, error) {
	repo, err := s.repository(s.Reference, s.Username, s.Password)
	if err != nil {
		return nil, err
	}
	m, err := fetchManifest(ctx, repo, id)
	if errors.Is(err, errdef.ErrNotFound) {
		data, fleetErr := s.pullFleets(ctx, id)
		if fleetErr == nil {
			return data, nil
		}
		if !errors.Is(fleetErr, errdef.ErrNotFound) {
			return nil, fleetErr
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", s.Ref(id), err)
	}
	if m.ArtifactType != ArtifactType || len(m.Layers) != 1 || m.Layers[0].MediaType != ManifestMediaType {
		return nil, errors.New("pulling " + s.Ref(id) + ": not a bundle's contents")
	}
	blob, err := content.FetchAll(ctx, repo, m.Layers[0])
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", s.Ref(id), err)
	}
	return blob, nil
}

// The layout Fleet pushes contents in: a repository per content ID under the reference, tag
// latest, one layer of the manifest's JSON annotated with the ID.
const (
	fleetArtifactType = "application/fleet.manifest"
	fleetLayerType    = "application/fleet.file"
	fleetTag          = "latest"
)

// FleetRef is where Fleet keeps the contents of id: reference/id:latest.
func (s Storage) FleetRef(id string) string { return s.Reference + "/" + id + ":" + fleetTag }

// pullFleets reads the contents of id from where Fleet pushes them, gzipped as ours are.
func (s Storage) pullFleets(ctx context.Context, id string) ([]byte, error) {
	ref := s.FleetRef(id)
	repo, err := s.repository(s.Reference+"/"+id, s.Username, s.Password)
	if err != nil {
		return nil, err
	}
	m, err := fetchManifest(ctx, repo, fleetTag)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	if m.ArtifactType != fleetArtifactType || len(m.Layers) != 1 || m.Layers[0].MediaType != fleetLayerType ||
		m.Layers[0].Annotations["id"] != id {
		return nil, errors.New("pulling " + ref + ": not a bundle's contents")
	}
	blob, err := content.FetchAll(ctx, repo, m.Layers[0])
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	if !json.Valid(blob) {
		return nil, errors.New("pulling " + ref + ": its layer is not a manifest's JSON")
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(blob); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// fetchManifest reads the image manifest reference (a tag) of repo names.
func fetchManifest(ctx context.Context, repo *remote.Repository, reference string) (ocispec.Manifest, error) {
	var m ocispec.Manifest
	desc, rc, err := repo.FetchReference(ctx, reference)
	if err != nil {
		return m, err
	}
	data, err := content.ReadAll(rc, desc)
	rc.Close()
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(data, &m)
}
