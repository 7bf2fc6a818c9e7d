package target

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// ContentName is the name of the Content holding a manifest: "s-" and the manifest's sha256,
// cut to a valid object name.
func ContentName(manifest []byte) string {
	sum := sha256.Sum256(manifest)
	return ("s-" + hex.EncodeToString(sum[:]))[:63]
}

// Manifest is the canonical bytes of a Bundle's resources: what a Content stores.
func Manifest(resources []fleet.BundleResource) ([]byte, error) {
	return json.Marshal(map[string]any{"resources": resources})
}

// DeploymentID identifies what an agent must deploy: the Content and the options. Diff and
// correctDrift are left out of the hash: changing how drift is handled does not redeploy.
func DeploymentID(contentName string, opts fleet.BundleDeploymentOptions) (string, error) {
	o := opts.DeepCopy()
	o.Diff = nil
	o.CorrectDrift = nil
	data, err := json.Marshal(o)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return contentName + ":" + hex.EncodeToString(sum[:]), nil
}
