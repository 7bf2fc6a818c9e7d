package bundle

import (
	"fmt"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"

	"github.com/fleetgo/fleet/internal/bundlevalues"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// StoredValues puts back into b (the handler's copy) the Helm values kept outside the Bundle, in
// its values Secret (bundlevalues), as `fleet apply` and Fleet 0.13 and later write them. A
// Bundle without valuesHash holds its values itself.
func StoredValues(secrets corecontrollers.SecretCache, b *fleet.Bundle) error {
	if b.Spec.ValuesHash == "" || secrets == nil {
		return nil
	}
	s, err := secrets.Get(b.Namespace, b.Name)
	if err != nil {
		return fmt.Errorf("the Helm values of bundle %s/%s (spec.valuesHash): secret %s/%s: %w", b.Namespace, b.Name, b.Namespace, b.Name, err)
	}
	return bundlevalues.RestoreBundle(b, s)
}
