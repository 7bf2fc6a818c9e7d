package helmdeployer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// DefaultValuesKey is the ConfigMap or Secret key read when valuesFrom names none.
const DefaultValuesKey = "values.yaml"

// readValuesFrom reads each valuesFrom source in this cluster and returns the parsed values in
// order and a hash of the raw data (to notice when a source changes). A missing source is an
// error the user fixes by creating it; it is retried, not fatal.
func readValuesFrom(ctx context.Context, kube kubernetes.Interface, from []fleet.ValuesFrom, defaultNamespace string) ([]map[string]interface{}, string, error) {
	h := sha256.New()
	var out []map[string]interface{}
	for i, v := range from {
		var (
			kind, name, ns, key string
			data                []byte
		)
		switch {
		case v.ConfigMapKeyRef != nil:
			kind, name, ns, key = "configMap", v.ConfigMapKeyRef.Name, v.ConfigMapKeyRef.Namespace, v.ConfigMapKeyRef.Key
		case v.SecretKeyRef != nil:
			kind, name, ns, key = "secret", v.SecretKeyRef.Name, v.SecretKeyRef.Namespace, v.SecretKeyRef.Key
		default:
			continue
		}
		if ns == "" {
			ns = defaultNamespace
		}
		if key == "" {
			key = DefaultValuesKey
		}
		field := fmt.Sprintf("helm.valuesFrom[%d].%sKeyRef", i, kind)
		var err error
		if kind == "configMap" {
			cm, gerr := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err = gerr; err == nil {
				data = []byte(cm.Data[key])
			}
		} else {
			s, gerr := kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
			if err = gerr; err == nil {
				data = s.Data[key]
			}
		}
		if apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("%s: %s %s/%s not found", field, kind, ns, name)
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s: reading %s %s/%s: %w", field, kind, ns, name, err)
		}
		values := map[string]interface{}{}
		if err := yaml.Unmarshal(data, &values); err != nil {
			return nil, "", Permanent(fmt.Errorf("%s: key %s of %s %s/%s is not a YAML map: %w", field, key, kind, ns, name, err))
		}
		fmt.Fprintf(h, "%d:%s/%s/%s/%s:", i, kind, ns, name, key)
		h.Write(data)
		out = append(out, values)
	}
	return out, hex.EncodeToString(h.Sum(nil))[:32], nil
}
