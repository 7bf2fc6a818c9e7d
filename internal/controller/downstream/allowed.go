package downstream

import (
	"context"
	"fmt"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// reviewTTL is how long an answer of the apiserver on whether a service account may read a
// Secret is used again, and how soon a Secret refused for want of that right is looked at again
// (a RoleBinding granting it wakes nothing here).
const reviewTTL = time.Minute

// allowed says whether the Secret s, which bd's downstreamResources name, may be copied to bd's
// cluster. Whoever may write a Bundle in a namespace names any Secret of it there, and the
// manager reads with its own identity: a rule must allow the copy, or a tenant who may not read
// a Secret of the namespace could ship it to a cluster where it can. The rules: the Secret lists
// the use in its secretuse.UsesAnnotation, or the bundle's service account, as an identity of
// the bundle's namespace on this cluster, may get it (a SubjectAccessReview).
func (h *handler) allowed(bd *fleet.BundleDeployment, s *corev1.Secret) error {
	if secretuse.AllowedUse(s, secretuse.UseDownstream) {
		return nil
	}
	use := fmt.Sprintf("downstreamResources of bundle %s/%s", bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.BundleLabel])
	sa := bd.Spec.Options.ServiceAccount
	if sa == "" {
		return secretuse.NotAllowed(s, use, fmt.Sprintf("it is not annotated %s=%s and the bundle names no serviceAccount that may read it",
			secretuse.UsesAnnotation, secretuse.UseDownstream))
	}
	ok, err := h.reviews.allowed(h.ctx, s.Namespace, sa, s.Name, time.Now())
	if err != nil {
		return err
	}
	if !ok {
		return secretuse.NotAllowed(s, use, fmt.Sprintf("it is not annotated %s=%s and service account %s/%s may not get it",
			secretuse.UsesAnnotation, secretuse.UseDownstream, s.Namespace, sa))
	}
	return nil
}

// reviews remembers, for reviewTTL, whether a service account may get a Secret: every
// BundleDeployment of a bundle on every cluster asks the same question.
type reviews struct {
	mu  sync.Mutex
	m   map[string]review
	ask func(ctx context.Context, namespace, serviceAccount, secret string) (bool, error)
}

type review struct {
	allowed bool
	at      time.Time
}

func newReviews(kube kubernetes.Interface) *reviews {
	return &reviews{m: map[string]review{}, ask: func(ctx context.Context, ns, sa, secret string) (bool, error) {
		user := "system:serviceaccount:" + ns + ":" + sa
		r, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
				Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets", Name: secret}}},
			metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("asking whether %s may get secret %s/%s: %w", user, ns, secret, err)
		}
		return r.Status.Allowed, nil
	}}
}

// allowed is the answer for the service account ns/sa and the Secret ns/secret: remembered when
// younger than reviewTTL, else asked again.
func (r *reviews) allowed(ctx context.Context, ns, sa, secret string, now time.Time) (bool, error) {
	key := ns + "/" + sa + "/" + secret
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
	allowed, err := r.ask(ctx, ns, sa, secret)
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	r.m[key] = review{allowed: allowed, at: now}
	r.mu.Unlock()
	return allowed, nil
}
