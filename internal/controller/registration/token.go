// Package registration runs the manager's side of cluster registration: registration tokens
// (an import identity and the values an agent needs) and ClusterRegistrations (a Cluster, its
// agent identity and permissions, and a short-lived credential). (manager)
package registration

import (
	"context"
	"fmt"
	"time"

	"github.com/rancher/wrangler/v3/pkg/apply"
	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/config"
	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// neverExpires is the lifetime of the import token of a ClusterRegistrationToken without a TTL.
const neverExpires = 10 * 365 * 24 * time.Hour

// minTokenLifetime is the shortest token the apiserver issues; a shorter TTL is enforced by
// deleting the import identity at expiry.
const minTokenLifetime = 10 * time.Minute

// tokenSet is the apply set of a registration token: its import identity, that identity's
// right to read credentials in the registration namespace, and the values Secret.
const tokenSet = "fleet-registration-token"

type tokens struct {
	ctx    context.Context
	kube   kubernetes.Interface
	apply  apply.Apply
	config *config.Store
	tokens fleetcontrollers.ClusterRegistrationTokenController
	regNS  string
	now    func() time.Time
}

func (t *tokens) log(tok *fleet.ClusterRegistrationToken) *logrus.Entry {
	return logrus.WithFields(logfields.For("clusterregistrationtoken", tok.Namespace, tok.Name))
}

// onChange revokes a deleted token and deletes an expired one.
func (t *tokens) onChange(key string, tok *fleet.ClusterRegistrationToken) (*fleet.ClusterRegistrationToken, error) {
	if tok == nil {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			return nil, err
		}
		return nil, t.revoke(ns, name)
	}
	if tok.DeletionTimestamp != nil {
		return tok, t.revoke(tok.Namespace, tok.Name)
	}
	if _, _, expired := t.lifetime(tok); !expired {
		return tok, nil
	}
	t.log(tok).Info("registration token expired: deleting it")
	if err := t.revoke(tok.Namespace, tok.Name); err != nil {
		return tok, err
	}
	err := t.tokens.Delete(tok.Namespace, tok.Name, &metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		err = nil
	}
	return tok, err
}

// lifetime is when the token expires (nil: never), how long an import token issued now must
// live, and whether it has expired.
func (t *tokens) lifetime(tok *fleet.ClusterRegistrationToken) (*metav1.Time, time.Duration, bool) {
	if tok.Spec.TTL == nil || tok.Spec.TTL.Duration <= 0 {
		return nil, neverExpires, false
	}
	at := metav1.NewTime(tok.CreationTimestamp.Add(tok.Spec.TTL.Duration))
	now := t.now()
	return &at, max(at.Sub(now), minTokenLifetime), !now.Before(at.Time)
}

// issue gives a token its import identity and values Secret, and returns the status naming them
// (the generated status handler writes it when it changed).
func (t *tokens) issue(tok *fleet.ClusterRegistrationToken, status fleet.ClusterRegistrationTokenStatus) (fleet.ClusterRegistrationTokenStatus, error) {
	expires, lifetime, expired := t.lifetime(tok)
	if tok.DeletionTimestamp != nil || expired {
		return status, nil
	}
	if expires != nil {
		t.tokens.EnqueueAfter(tok.Namespace, tok.Name, expires.Sub(t.now())+time.Second)
	}
	if status.SecretName == tok.Name {
		// Issued already: the values Secret holds a token valid until expiry.
		if _, err := t.kube.CoreV1().Secrets(tok.Namespace).Get(t.ctx, tok.Name, metav1.GetOptions{}); err == nil {
			return status, nil
		}
	}
	if err := t.write(tok, lifetime); err != nil {
		return status, err
	}
	status.SecretName, status.Expires = tok.Name, expires
	return status, nil
}

// write applies the token's set: its import identity, then (with an import token of the given
// lifetime) the values Secret.
func (t *tokens) write(tok *fleet.ClusterRegistrationToken, lifetime time.Duration) error {
	sa := registration.ImportServiceAccount(tok.Name)
	labels := map[string]string{registration.TokenLabel: names.SafeConcatName(tok.Namespace, tok.Name)}
	meta := metav1.ObjectMeta{Name: sa, Namespace: tok.Namespace, Labels: labels}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: tok.Namespace, Name: sa}}
	objs := []runtime.Object{
		&corev1.ServiceAccount{ObjectMeta: meta},
		&rbacv1.Role{ObjectMeta: meta, Rules: registration.ImportRules()},
		&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: roleRef("Role", sa), Subjects: subjects},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: importBinding(tok.Namespace, tok.Name), Namespace: t.regNS, Labels: labels},
			RoleRef: roleRef("Role", registration.CredentialReaderRole), Subjects: subjects},
	}
	// The identity first: the token is issued for it.
	set := t.apply.WithSetID(tokenSet).WithOwner(tok)
	if err := set.ApplyObjects(objs...); err != nil {
		return fmt.Errorf("writing the import identity of %s/%s: %w", tok.Namespace, tok.Name, err)
	}
	secs := int64(lifetime / time.Second)
	tr, err := t.kube.CoreV1().ServiceAccounts(tok.Namespace).CreateToken(t.ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("issuing the import token of %s/%s: %w", tok.Namespace, tok.Name, err)
	}
	cfg := t.config.Get()
	values, err := yaml.Marshal(registration.Values{Token: tr.Status.Token, APIServerURL: cfg.APIServerURL, APIServerCA: cfg.APIServerCA,
		ClusterNamespace: tok.Namespace, SystemRegistrationNamespace: t.regNS})
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tok.Name, Namespace: tok.Namespace, Labels: labels},
		Type: "fleet.cattle.io/cluster-registration-values", Data: map[string][]byte{registration.ValuesKey: values}}
	if err := set.ApplyObjects(append(objs, secret)...); err != nil {
		return fmt.Errorf("writing the values of %s/%s: %w", tok.Namespace, tok.Name, err)
	}
	return nil
}

// revoke deletes a token's import identity, its permissions and its values (its set, applied
// empty): its token stops working at once (a token of a deleted ServiceAccount is refused).
func (t *tokens) revoke(ns, name string) error {
	err := t.apply.WithSetID(tokenSet).WithOwnerKey(ns+"/"+name, fleet.SchemeGroupVersion.WithKind("ClusterRegistrationToken")).ApplyObjects()
	if err != nil {
		return fmt.Errorf("revoking registration token %s/%s: %w", ns, name, err)
	}
	return nil
}

func importBinding(ns, name string) string { return names.SafeConcatName("import", ns, name) }
