package deployer

import (
	"fmt"
	"maps"

	"github.com/fleetgo/fleet/internal/render"
	"github.com/fleetgo/fleet/internal/sealing"
	"github.com/fleetgo/fleet/internal/sopsfile"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// SealingKey is the agent's key pair (internal/agent/sealkey): the manager seals a bundle's SOPS
// files to Public; Private unseals them.
type SealingKey struct {
	Private, Public string
}

// unsealed are files with each SOPS file replaced by its copy the manager sealed to this
// cluster (bd.spec.sealedFiles), unsealed: only one sealed for this deployment, this name, this
// ciphertext and this cluster's key. A SOPS file without one is not deployed (its ciphertext
// is no manifest), and says why.
func (h *handler) unsealed(bd *fleet.BundleDeployment, files render.Files) (render.Files, error) {
	var out render.Files
	for name, data := range files {
		if !sopsfile.Is(name, data) {
			continue
		}
		if out == nil {
			out = maps.Clone(files) // the cached files stay as the Content holds them
		}
		plain, err := h.unseal(bd, name, data)
		if err != nil {
			return nil, fmt.Errorf("secret file %s: %w", name, err)
		}
		out[name] = plain
	}
	if out == nil {
		return files, nil
	}
	return out, nil
}

func (h *handler) unseal(bd *fleet.BundleDeployment, name string, ciphertext []byte) ([]byte, error) {
	if h.sealing.Private == "" {
		return nil, fmt.Errorf("this agent has no sealing key")
	}
	bind := sealing.Binding(bd.Namespace, bd.Name, name)
	for _, f := range bd.Spec.SealedFiles {
		if f.Name != name {
			continue
		}
		if f.Source != sealing.Source(ciphertext, h.sealing.Public, bind+f.Context) {
			return nil, fmt.Errorf("sealed from another ciphertext or to another key: the manager seals it again")
		}
		data, err := sealing.Unseal(h.sealing.Private, bind, f.Sealed)
		if err != nil {
			return nil, err
		}
		return data["file"], nil
	}
	return nil, fmt.Errorf("not sealed to this cluster yet")
}
