package downstream

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// reviewTTL is how long an answer of the apiserver on whether a service account may read a
// Secret or ConfigMap is used again, and how soon one refused for want of that right is looked
// at again (a RoleBinding granting it wakes nothing here).
const reviewTTL = time.Minute

// allowed says whether obj, a Secret or ConfigMap (kind) that bd's downstreamResources name, may
// be copied to bd's cluster. Whoever may write a Bundle in a namespace names any of them there,
// and the manager reads with its own identity: a rule must allow the copy, or a tenant who may
// not read one could ship it to a cluster where it can. The rules: obj lists the use in its
// secretuse.UsesAnnotation, or the bundle's service account, as an identity of the bundle's
// namespace on this cluster, may get it (a SubjectAccessReview).
func (h *handler) allowed(bd *fleet.BundleDeployment, kind string, obj metav1.Object) error {
	if secretuse.AllowedUse(obj, secretuse.UseDownstream) {
		return nil
	}
	use := fmt.Sprintf("downstreamResources of bundle %s/%s", bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.BundleLabel])
	sa := bd.Spec.Options.ServiceAccount
	if sa == "" {
		return secretuse.NotAllowed(kind, obj, use, fmt.Sprintf("it is not annotated %s=%s and the bundle names no serviceAccount that may read it",
			secretuse.UsesAnnotation, secretuse.UseDownstream))
	}
	ok, err := h.reviews.allowed(h.ctx, access{obj.GetNamespace(), sa, resourceOf[kind], obj.GetName()}, time.Now())
	if err != nil {
		return err
	}
	if !ok {
		return secretuse.NotAllowed(kind, obj, use, fmt.Sprintf("it is not annotated %s=%s and service account %s/%s may not get it",
			secretuse.UsesAnnotation, secretuse.UseDownstream, obj.GetNamespace(), sa))
	}
	return nil
}

// resourceOf is the API resource of a kind downstreamResources copy.
var resourceOf = map[string]string{KindSecret: "secrets", KindConfigMap: "configmaps"}

// access is the question a review asks: may the service account namespace/serviceAccount get
// the object name of resource in its namespace?
type access struct{ namespace, serviceAccount, resource, name string }

// reviews remembers, for reviewTTL, whether a service account may get a Secret or ConfigMap:
// every BundleDeployment of a bundle on every cluster asks the same question.
type reviews struct {
	mu  sync.Mutex
	m   map[access]review
	ask func(ctx context.Context, a access) (bool, error)
}

type review struct {
	allowed bool
	at      time.Time
}

func newReviews(kube kubernetes.Interface) *reviews {
	return &reviews{m: map[access]review{}, ask: func(ctx context.Context, a access) (bool, error) {
		user := "system:serviceaccount:" + a.namespace + ":" + a.serviceAccount
		r, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + a.namespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: a.namespace, Verb: "get", Resource: a.resource, Name: a.name}}},
			metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether %s may get %s %s/%s: %w", user, a.resource, a.namespace, a.name, err)
		}
		return r.Status.Allowed, nil
	}}
}

// allowed is the answer to the question key: remembered when younger than reviewTTL, else asked
// again.
func (r *reviews) allowed(ctx context.Context, key access, now time.Time) (bool, error) {
	r.mu.Lock()
	got, ok := r.m[key]
	if ok && now.Sub(got.at) >= reviewTTL {
		delete(r.m, key)
		ok = false
	}
	r.mu.Unlock()
	if ok {
		return got.allowed, nil
	}
	allowed, err := r.ask(ctx, key)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	r.m[key] = review{allowed: allowed, at: now}
	r.mu.Unlock()
	return allowed, nil
}
