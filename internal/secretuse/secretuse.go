// Package secretuse decides which Secrets the manager reads or copies when a GitRepo, HelmOp,
// Bundle (downstreamResources) or ImageScan names them. Whoever may write those objects in a
// namespace picks the name, and the manager reads with its own identity: without a rule, a
// tenant could have the manager ship it any credential kept in that namespace, such as the
// kubeconfig of a cluster that Rancher or an administrator imports (Cluster.spec.kubeConfigSecret),
// a registration token's values, or a ServiceAccount token. Those are refused, with an error that
// names the Secret and the reason. (manager)
package secretuse

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Guard checks Secrets before the manager uses them for an object that named them.
type Guard struct {
	// Kubeconfig reports whether a Cluster names the Secret namespace/name as its kubeConfigSecret.
	Kubeconfig func(namespace, name string) bool
}

// RegistrationValuesType is the type of a ClusterRegistrationToken's values Secret.
const RegistrationValuesType = "fleet.cattle.io/cluster-registration-values"

// Check refuses a Secret that is a credential of the manager or of a cluster; use says what
// named it ("downstreamResources of bundle x", "helmSecretName").
func (g Guard) Check(s *corev1.Secret, use string) error {
	why := ""
	switch {
	case s.Type == corev1.SecretTypeServiceAccountToken:
		why = "it is a ServiceAccount token"
	case s.Type == RegistrationValuesType || s.Labels[registration.TokenLabel] != "":
		why = "it holds a registration token"
	case s.Type == registration.CredentialSecretType:
		why = "it holds an agent's credential"
	case s.Labels[fleet.ManagedLabel] == "true":
		why = "the fleet manager keeps it for itself"
	case g.Kubeconfig != nil && g.Kubeconfig(s.Namespace, s.Name):
		why = "it is the kubeConfigSecret of a Cluster"
	default:
		return nil
	}
	return NotAllowed("Secret", s, use, why)
}

// Refused is Check's error: the Secret may not be used, and waiting does not change that.
type Refused struct {
	msg string
	// Kind is the refused object's kind: "Secret" unless NotAllowed said otherwise.
	Kind string
}

func (r *Refused) Error() string { return r.msg }

// byKubeconfig indexes Clusters by "namespace/name" of their kubeConfigSecret.
const byKubeconfig = "fleet.cattle.io/by-kubeconfig-secret"

// ForClusters is a Guard that knows the kubeconfig Secrets of the Clusters in the cache; it adds
// an index to the cache, so it must be made before the cache starts.
func ForClusters(clusters fleetcontrollers.ClusterCache) Guard {
	clusters.AddIndexer(byKubeconfig, func(c *fleet.Cluster) ([]string, error) {
		if c.Spec.KubeConfigSecret == "" {
			return nil, nil
		}
		ns := c.Spec.KubeConfigSecretNamespace
		if ns == "" {
			ns = c.Namespace
		}
		return []string{ns + "/" + c.Spec.KubeConfigSecret}, nil
	})
	return Guard{Kubeconfig: func(namespace, name string) bool {
		found, err := clusters.GetByIndex(byKubeconfig, namespace+"/"+name)
		// Unsure is no: a lookup that fails refuses.
		return err != nil || len(found) > 0
	}}
}

// UsesAnnotation on a Secret lists (comma-separated) the uses its namespace's owner allows for
// it beyond what RBAC already does (see Allowed): "downstreamResources" lets a Bundle of the
// namespace copy it to its clusters.
const UsesAnnotation = "fleet.cattle.io/allowed-uses"

// UseDownstream is the use of a Secret that a Bundle's downstreamResources names.
const UseDownstream = "downstreamResources"

// AllowedUse says whether the UsesAnnotation of obj (a Secret, or a ConfigMap a Bundle's
// downstreamResources name) lists use.
func AllowedUse(obj metav1.Object, use string) bool {
	for _, u := range strings.Split(obj.GetAnnotations()[UsesAnnotation], ",") {
		if strings.TrimSpace(u) == use {
			return true
		}
	}
	return false
}

// NotAllowed is the refusal of obj, a Secret or ConfigMap (kind), for use, saying why.
func NotAllowed(kind string, obj metav1.Object, use, why string) *Refused {
	return &Refused{Kind: kind, msg: fmt.Sprintf("%s: %s %s/%s cannot be used: %s", use, strings.ToLower(kind), obj.GetNamespace(), obj.GetName(), why)}
}
