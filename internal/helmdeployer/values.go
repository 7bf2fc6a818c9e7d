package helmdeployer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"helm.sh/helm/v3/pkg/chartutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/helmrelease"
	"github.com/fleetgo/fleet/internal/render"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// DefaultValuesKey is the ConfigMap or Secret key read when valuesFrom names none.
const DefaultValuesKey = "values.yaml"

// readValuesFrom reads each valuesFrom source in this cluster and returns the parsed values in
// order and a hash of the raw data (to notice when a source changes). An entry naming both a
// ConfigMap and a Secret reads both, the Secret's values over the ConfigMap's (as Fleet merges
// them). A missing source is an error the user fixes by creating it; it is retried, not fatal.
func readValuesFrom(ctx context.Context, kube kubernetes.Interface, from []fleet.ValuesFrom, defaultNamespace string) ([]map[string]any, string, error) {
	h := sha256.New()
	var out []map[string]any
	for i, v := range from {
		var refs []valuesRef
		if r := v.ConfigMapKeyRef; r != nil {
			refs = append(refs, valuesRef{kind: "configMap", name: r.Name, ns: r.Namespace, key: r.Key})
		}
		if r := v.SecretKeyRef; r != nil {
			refs = append(refs, valuesRef{kind: "secret", name: r.Name, ns: r.Namespace, key: r.Key})
		}
		for _, ref := range refs {
			if ref.ns == "" {
				ref.ns = defaultNamespace
			}
			if ref.key == "" {
				ref.key = DefaultValuesKey
			}
			values, data, err := ref.read(ctx, kube, fmt.Sprintf("helm.valuesFrom[%d].%sKeyRef", i, ref.kind))
			if err != nil {
				return nil, "", err
			}
			fmt.Fprintf(h, "%d:%s/%s/%s/%s:", i, ref.kind, ref.ns, ref.name, ref.key)
			h.Write(data)
			out = append(out, values)
		}
	}
	return out, hex.EncodeToString(h.Sum(nil))[:32], nil
}

// valuesRef is one source of a valuesFrom entry: a key of a ConfigMap or a Secret.
type valuesRef struct {
	kind, name, ns, key string
}

// read returns the source's values and raw data; field names the entry in errors.
func (r valuesRef) read(ctx context.Context, kube kubernetes.Interface, field string) (map[string]any, []byte, error) {
	var (
		data []byte
		err  error
	)
	if r.kind == "configMap" {
		cm, gerr := kube.CoreV1().ConfigMaps(r.ns).Get(ctx, r.name, metav1.GetOptions{})
		if err = gerr; err == nil {
			data = []byte(cm.Data[r.key])
		}
	} else {
		s, gerr := kube.CoreV1().Secrets(r.ns).Get(ctx, r.name, metav1.GetOptions{})
		if err = gerr; err == nil {
			data = s.Data[r.key]
		}
	}
	if apierrors.IsNotFound(err) {
		return nil, nil, fmt.Errorf("%s: %s %s/%s not found", field, r.kind, r.ns, r.name)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("%s: reading %s %s/%s: %w", field, r.kind, r.ns, r.name, err)
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(data, &values); err != nil {
		return nil, nil, helmrelease.Permanent(fmt.Errorf("%s: key %s of %s %s/%s is not a YAML map: %w", field, r.key, r.kind, r.ns, r.name, err))
	}
	return values, data, nil
}

// Values are the Helm values to deploy with: helm.values, overridden by each valuesFrom source
// in order (read now, in this cluster), and a hash of the valuesFrom data ("" without any).
func (d *Deployer) Values(ctx context.Context, opts *fleet.BundleDeploymentOptions) (map[string]any, string, error) {
	values := map[string]any{}
	if opts.Helm == nil {
		return values, "", nil
	}
	if opts.Helm.Values != nil {
		values = opts.Helm.Values.DeepCopy().Data
		if values == nil {
			values = map[string]any{}
		}
	}
	if len(opts.Helm.ValuesFrom) == 0 {
		return values, "", nil
	}
	// Read as the bundle's ServiceAccount: a restricted bundle gets no Secret it could not read.
	as, _, err := d.bundleClient(ctx, opts.ServiceAccount)
	if err != nil {
		return nil, "", err
	}
	from, hash, err := readValuesFrom(ctx, as, opts.Helm.ValuesFrom, render.Namespace(opts))
	if err != nil {
		return nil, "", err
	}
	for _, v := range from {
		values = chartutil.MergeTables(v, values)
	}
	return values, hash, nil
}
