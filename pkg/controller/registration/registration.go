package registration

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/config"
	"github.com/fleetgo/fleet/pkg/ensure"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/logfields"
	"github.com/fleetgo/fleet/pkg/names"
	"github.com/fleetgo/fleet/pkg/registration"
	"github.com/fleetgo/fleet/pkg/target"
)

// Deps are what the registration controllers read and write.
type Deps struct {
	Kube                 kubernetes.Interface
	Tokens               fleetcontrollers.ClusterRegistrationTokenController
	ClusterRegistrations fleetcontrollers.ClusterRegistrationController
	Clusters             fleetcontrollers.ClusterController
	// RegistrationNamespace holds the credential Secrets (cattle-fleet-clusters-system).
	RegistrationNamespace string
	// CredentialLifetime is how long an agent credential is valid (at least 10 minutes).
	CredentialLifetime time.Duration
	// Recorder, when set, records a Registered Event on each Cluster an agent registers as.
	Recorder record.EventRecorder
}

// DefaultCredentialLifetime is how long an agent's credential lives. The agent renews it every
// hour (or third of the lifetime, if shorter), so it may be cut off from the manager for most of
// a day and still renew it when it is back.
const DefaultCredentialLifetime = 24 * time.Hour

// CheckCredentialLifetime refuses an agent credential lifetime the apiserver would not honour:
// it issues no token shorter than ten minutes, and silently lengthening (or replacing) what an
// administrator asked for would hide the mistake.
func CheckCredentialLifetime(d time.Duration) error {
	if d < minTokenLifetime {
		return fmt.Errorf("--agent-credential-lifetime %s: must be at least %s (the shortest token the apiserver issues)", d, minTokenLifetime)
	}
	return nil
}

// byClientID indexes Clusters by "namespace/spec.clientID".
const byClientID = "fleet.cattle.io/by-client-id"

// credentialSecretTTL is how long a credential Secret stays in the registration namespace for
// its agent to pick up.
const credentialSecretTTL = 40 * time.Minute

// Register starts the token and registration controllers and makes sure of the shared roles.
func Register(ctx context.Context, d Deps) error {
	if d.CredentialLifetime == 0 {
		d.CredentialLifetime = DefaultCredentialLifetime
	}
	if err := CheckCredentialLifetime(d.CredentialLifetime); err != nil {
		return err
	}
	if err := ensureSharedRoles(ctx, d.Kube, d.RegistrationNamespace); err != nil {
		return err
	}
	t := &tokens{kube: d.Kube, tokens: d.Tokens, regNS: d.RegistrationNamespace, now: time.Now}
	d.Tokens.OnChange(ctx, "clusterregistrationtoken", t.onChange)
	d.Clusters.Cache().AddIndexer(byClientID, func(c *fleet.Cluster) ([]string, error) {
		if c.Spec.ClientID == "" {
			return nil, nil
		}
		return []string{c.Namespace + "/" + c.Spec.ClientID}, nil
	})
	r := &registrations{Deps: d}
	d.ClusterRegistrations.OnChange(ctx, "clusterregistration", r.onChange)
	a := &adopter{kube: d.Kube, clusters: d.Clusters}
	d.Clusters.OnChange(ctx, "cluster-identity", a.onChange)
	return nil
}

func ensureSharedRoles(ctx context.Context, kube kubernetes.Interface, regNS string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: regNS}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", regNS, err)
	}
	if err := ensure.Role(ctx, kube, regNS, registration.CredentialReaderRole, registration.CredentialReaderRules(), nil, nil); err != nil {
		return err
	}
	cr := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: registration.ContentReaderRole}, Rules: registration.ContentReaderRules()}
	_, err = kube.RbacV1().ClusterRoles().Create(ctx, cr, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		cur, gerr := kube.RbacV1().ClusterRoles().Get(ctx, cr.Name, metav1.GetOptions{})
		if gerr != nil {
			return gerr
		}
		cur.Rules = cr.Rules
		_, err = kube.RbacV1().ClusterRoles().Update(ctx, cur, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing cluster role %s: %w", cr.Name, err)
	}
	return nil
}

type registrations struct {
	Deps
}

func (r *registrations) log(reg *fleet.ClusterRegistration) *logrus.Entry {
	return logrus.WithFields(logfields.For("clusterregistration", reg.Namespace, reg.Name))
}

// onChange grants a registration: the Cluster, its agent identity and a credential.
func (r *registrations) onChange(_ string, reg *fleet.ClusterRegistration) (*fleet.ClusterRegistration, error) {
	if reg == nil || reg.DeletionTimestamp != nil {
		return reg, nil
	}
	ctx := context.Background()
	secretName := registration.CredentialSecret(reg.Spec.ClientID, reg.Spec.ClientRandom)
	if reg.Status.Granted {
		// The credential Secret is for picking up, not for keeping.
		if age := time.Since(reg.CreationTimestamp.Time); age < credentialSecretTTL {
			r.ClusterRegistrations.EnqueueAfter(reg.Namespace, reg.Name, credentialSecretTTL-age)
			return reg, nil
		}
		err := r.Kube.CoreV1().Secrets(r.RegistrationNamespace).Delete(ctx, secretName, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			err = nil
		}
		return reg, err
	}
	if reg.Spec.ClientID == "" || reg.Spec.ClientRandom == "" {
		r.log(reg).Warn("registration without clientID or clientRandom: ignored")
		return reg, nil
	}
	cluster, err := r.cluster(reg)
	if err != nil {
		return reg, err
	}
	ns := target.ClusterNamespace(cluster)
	if cluster.Status.Namespace != ns {
		// The cluster controller has not given it its namespace yet.
		r.ClusterRegistrations.EnqueueAfter(reg.Namespace, reg.Name, 500*time.Millisecond)
		return reg, nil
	}
	token, err := r.grant(ctx, cluster)
	if err != nil {
		return reg, err
	}
	cfg := config.Get()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: r.RegistrationNamespace,
		Labels: map[string]string{fleet.ClusterLabel: cluster.Name, fleet.ClusterNamespaceLabel: cluster.Namespace}},
		Type: "fleet.cattle.io/cluster-registration-credential",
		Data: map[string][]byte{
			registration.KeyToken: []byte(token), registration.KeyAPIServerURL: []byte(cfg.APIServerURL),
			registration.KeyAPIServerCA: []byte(cfg.APIServerCA), registration.KeyClusterNamespace: []byte(ns),
			registration.KeyClusterName: []byte(cluster.Name), registration.KeyClusterObjectNamespace: []byte(cluster.Namespace),
			registration.KeyServiceAccount: []byte(registration.AgentServiceAccount),
		}}
	if err := ensure.Secret(ctx, r.Kube, secret); err != nil {
		return reg, err
	}
	// Older requests of the same agent are done with.
	if all, err := r.ClusterRegistrations.Cache().List(reg.Namespace, labels.Everything()); err == nil {
		for _, old := range all {
			if old.Name != reg.Name && old.Spec.ClientID == reg.Spec.ClientID && old.CreationTimestamp.Before(&reg.CreationTimestamp) {
				_ = r.ClusterRegistrations.Delete(old.Namespace, old.Name, &metav1.DeleteOptions{})
			}
		}
	}
	r.log(reg).WithField("cluster", cluster.Name).Info("cluster registered")
	if r.Recorder != nil {
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "Registered", "an agent registered as this cluster (%s/%s); its credential is in namespace %s",
			reg.Namespace, reg.Name, cluster.Status.Namespace)
	}
	reg = reg.DeepCopy()
	reg.Status.Granted, reg.Status.ClusterName = true, cluster.Name
	return r.ClusterRegistrations.UpdateStatus(reg)
}

// cluster finds the Cluster of the registration's clientID, or creates it with the agent's
// labels (which apply only here: afterwards a Cluster's labels change on the manager only).
func (r *registrations) cluster(reg *fleet.ClusterRegistration) (*fleet.Cluster, error) {
	name := registration.ClusterName(reg.Spec.ClientID)
	if c, err := r.Clusters.Cache().Get(reg.Namespace, name); err == nil {
		return c, nil
	}
	// A Cluster made ahead of time (by an admin, or to be imported) with spec.clientID.
	if found, err := r.Clusters.Cache().GetByIndex(byClientID, reg.Namespace+"/"+reg.Spec.ClientID); err == nil && len(found) > 0 {
		return found[0], nil
	}
	labels := registration.SanitizeLabels(reg.Spec.ClusterLabels)
	if config.Get().IgnoreClusterRegistrationLabels {
		labels = nil
	}
	c, err := r.Clusters.Create(&fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: reg.Namespace, Labels: labels,
			Annotations: map[string]string{registration.ClientIDAnnotation: reg.Spec.ClientID,
				registration.IdentityAnnotation: registration.AgentServiceAccount}},
		Spec: fleet.ClusterSpec{ClientID: reg.Spec.ClientID},
	})
	if apierrors.IsAlreadyExists(err) {
		return r.Clusters.Get(reg.Namespace, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("creating cluster %s/%s for registration %s: %w", reg.Namespace, name, reg.Name, err)
	}
	return c, nil
}

// grant gives the Cluster's agent its identity and permissions and returns a fresh credential.
func (r *registrations) grant(ctx context.Context, c *fleet.Cluster) (string, error) {
	ns, sa := target.ClusterNamespace(c), registration.AgentServiceAccount
	if err := identity(ctx, r.Kube, c); err != nil {
		return "", err
	}
	secs := int64(r.CredentialLifetime / time.Second)
	tr, err := r.Kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("issuing the credential of cluster %s/%s: %w", c.Namespace, c.Name, err)
	}
	return tr.Status.Token, nil
}

// Revoke takes a Cluster's agent identity and permissions away: tokens of a deleted
// ServiceAccount are refused at once, so the agent loses access immediately, before the
// namespace (and whatever else is in it) is gone.
func Revoke(kube kubernetes.Interface) func(*fleet.Cluster) error {
	return func(c *fleet.Cluster) error {
		ctx := context.Background()
		statusRole := names.SafeConcatName("fleet-agent", c.Name)
		ns := target.ClusterNamespace(c)
		errs := []error{
			kube.RbacV1().RoleBindings(c.Namespace).Delete(ctx, statusRole, metav1.DeleteOptions{}),
			kube.RbacV1().Roles(c.Namespace).Delete(ctx, statusRole, metav1.DeleteOptions{}),
			kube.CoreV1().ServiceAccounts(ns).Delete(ctx, registration.AgentServiceAccount, metav1.DeleteOptions{}),
			kube.RbacV1().ClusterRoleBindings().Delete(ctx, names.SafeConcatName("fleet-content", ns), metav1.DeleteOptions{}),
		}
		for _, err := range errs {
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("revoking the agent of cluster %s/%s: %w", c.Namespace, c.Name, err)
			}
		}
		return nil
	}
}
