// Package registration holds what the manager and the agent agree on when a cluster joins: the
// names of the Secrets and identities involved, the values a registration token hands out, how
// a Cluster is named from the agent's identity, and the permissions each identity gets.
//
// The flow: a ClusterRegistrationToken yields an import identity that may only create
// ClusterRegistrations in the token's namespace and read a Secret whose name it must already
// know. The agent presents its identity (clientID) and a random nonce in a ClusterRegistration;
// the manager maps it to a Cluster, gives that Cluster an agent identity (a ServiceAccount named
// after the cluster namespace in AgentIdentityNamespace, with a Role in the cluster namespace),
// and writes a short-lived credential for it into the Secret named by sha256(clientID
// + nonce) in the registration namespace. The agent keeps the credential, forgets the token and
// renews the credential through its own identity before it expires.
package registration

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/fleetgo/fleet/internal/names"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Secrets and keys.
const (
	// BootstrapSecret (downstream, agent namespace) holds a registration token's values until the
	// agent has registered.
	BootstrapSecret = "fleet-agent-bootstrap"
	// AgentSecret (downstream, agent namespace) holds the agent's own credential.
	AgentSecret = "fleet-agent"
	// KeySecret (downstream, agent namespace; key KeyRegistrationKey) holds the registration key
	// of the agent's last registration, apart from the credential: an agent registering again
	// after its credential was deleted or expired presents it.
	KeySecret = "fleet-agent-registration-key"
	// AgentConfigMap (downstream, agent namespace) holds the agent's configuration: key
	// ConfigKey, JSON {"labels": {...}, "clientID": "..."}.
	AgentConfigMap = "fleet-agent"
	ConfigKey      = "config"
	// ValuesKey is the key of a token's Secret holding its values as YAML, ready for the
	// fleet-agent chart.
	ValuesKey = "values"

	// CredentialSecretType is the type of the Secret (registration namespace) an agent picks its
	// credential up from.
	CredentialSecretType = "fleet.cattle.io/cluster-registration-credential"

	// Keys of the bootstrap Secret, the credential Secret and the agent Secret.
	KeyToken                  = "token"
	KeyAPIServerURL           = "apiServerURL"
	KeyAPIServerCA            = "apiServerCA"
	KeyClusterNamespace       = "clusterNamespace"
	KeySystemRegistrationNS   = "systemRegistrationNamespace"
	KeyClusterName            = "clusterName"
	KeyClusterObjectNamespace = "clusterObjectNamespace"
	KeyServiceAccount         = "serviceAccount"
	// KeyServiceAccountNamespace is where the agent's ServiceAccount lives (AgentIdentityNamespace).
	// A credential without it is one to trade (Fleet's, or this manager's before agent identities
	// moved there).
	KeyServiceAccountNamespace = "serviceAccountNamespace"
	// KeyKubeconfig (agent Secret) is the credential as a kubeconfig.
	KeyKubeconfig = "kubeconfig"
	// KeyDeploymentNamespace is where a Fleet agent's Secret names the cluster namespace (its
	// clusterNamespace key is the Cluster's own namespace there).
	KeyDeploymentNamespace = "deploymentNamespace"
	// KeyLabels (bootstrap Secret, optional) is JSON of labels that go with the token (the
	// ClusterGroup it registers into); they win over the agent ConfigMap's.
	KeyLabels = "labels"
	// KeyClientRandom (bootstrap Secret, written by the agent) is the nonce of the registration
	// the agent asked for and has not got yet: a request sent again after its answer was lost
	// is the same ClusterRegistration (RequestName), not a second one the grant of the first
	// would leave waiting for good.
	KeyClientRandom = "clientRandom"

	// AgentIdentityNamespace holds every agent's ServiceAccount (named after its cluster
	// namespace) and the Role that lets it renew its own token. One namespace for all of them lets
	// a single ClusterRoleBinding (ContentReaderBinding, to the namespace's ServiceAccount group)
	// give every agent Contents: the apiserver's authorizer visits every ClusterRoleBinding on
	// every request, so one per cluster made each request cost O(clusters)
	// (benchmarks/RESULTS.md). Nothing else belongs in it.
	AgentIdentityNamespace = "cattle-fleet-agent-identities"
	// AgentRole is the ClusterRole (AgentRules) every agent is bound to in its cluster namespace,
	// by a RoleBinding of the same name there.
	AgentRole = "fleet-agent-bundledeployments"
	// ContentReaderRole is the ClusterRole that lets agents get Contents by name;
	// ContentReaderBinding binds it to the ServiceAccounts of AgentIdentityNamespace.
	ContentReaderRole    = "fleet-content-reader"
	ContentReaderBinding = "fleet-content-readers"
	// ClusterStatusRole is the ClusterRole of ClusterStatusRules, and the name of its RoleBinding
	// in each namespace with registered Clusters.
	ClusterStatusRole = "fleet-agent-cluster-status"
	// CredentialReaderRole (in the registration namespace) lets import identities get a
	// credential Secret whose name they know.
	CredentialReaderRole = "fleet-registration-credential-reader"
	// TokenLabel marks what belongs to a ClusterRegistrationToken (its namespace/name hash).
	TokenLabel = "fleet.cattle.io/cluster-registration-token"
	// AllowReregistrationAnnotation ("true") on a Cluster lets the next registration with its
	// clientID have it while its agent still checks in; the manager removes it once granted.
	// Without it a registration waits until the Cluster's agent is Offline, so that a
	// registration token and a Cluster's clientID are not enough to take a live Cluster over.
	AllowReregistrationAnnotation = "fleet.cattle.io/allow-reregistration"
	// RequesterAnnotation on a ClusterRegistration is the user that created it (an import
	// identity: system:serviceaccount:<namespace>:import-<token>); the admission policy
	// fleet-cluster-registration-requester (charts/fleet-crd) refuses any other value, so the
	// manager knows which token a registration came with.
	RequesterAnnotation = "fleet.cattle.io/requested-by"
	// ClusterLabelsAnnotation on a ClusterRegistrationToken (JSON, label key to value; written by
	// `fleet install agent-token --group`) restricts the Clusters registered with it to exactly
	// these labels: what an agent asks for does not count, but for the keys
	// ClusterLabelKeysAnnotation lists.
	ClusterLabelsAnnotation = "fleet.cattle.io/cluster-labels"
	// ClusterLabelKeysAnnotation on a token that restricts labels (comma-separated label keys;
	// written by `fleet install agent-token --label-keys`) lists the keys whose values the agent
	// may choose, as long as they put the Cluster in no ClusterGroup beyond the token's.
	ClusterLabelKeysAnnotation = "fleet.cattle.io/cluster-label-keys"
	// ClientIDAnnotation on a Cluster created by registration records the agent's clientID.
	ClientIDAnnotation = "fleet.cattle.io/client-id"
	// IdentityAnnotation on a Cluster names the agent identity this manager gave it (set at
	// registration, or when taking over a Cluster a Fleet manager registered).
	IdentityAnnotation = "fleet.cattle.io/agent-identity"
	// KeyHashAnnotation on a Cluster is the SHA-256 (hex) of the registration key the manager
	// gave that Cluster's agent: with each granted registration (in the credential Secret, key
	// KeyRegistrationKey, which the agent keeps with its credential) and with each agent it
	// installs itself (an imported cluster's bootstrap Secret). A registration for a Cluster that
	// has one is granted only with that key (KeyAnnotation) or an administrator's
	// AllowReregistrationAnnotation: a registration token and a clientID (an imported Cluster's
	// is its UID, which every reader of Clusters sees) are not enough to take it over, nor is
	// the Cluster being Offline.
	KeyHashAnnotation = "fleet.cattle.io/registration-key-hash"
	// KeyAnnotation on a ClusterRegistration is the registration key the agent holds.
	KeyAnnotation = "fleet.cattle.io/registration-key"
	// KeyRegistrationKey is the key of the bootstrap, credential and agent Secrets holding the
	// cluster's registration key.
	KeyRegistrationKey = "registrationKey"
)

// NewKey is a fresh registration key and its KeyHashAnnotation value.
func NewKey() (key, hash string, err error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", "", err
	}
	key = hex.EncodeToString(b)
	return key, KeyHash(key), nil
}

// KeyHash is the KeyHashAnnotation value of key.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// KeyPatch is the merge patch that records hash as a Cluster's KeyHashAnnotation and, with
// allowanceUsed, removes the one-time AllowReregistrationAnnotation.
func KeyPatch(hash string, allowanceUsed bool) []byte {
	ann := map[string]any{KeyHashAnnotation: hash}
	if allowanceUsed {
		ann[AllowReregistrationAnnotation] = nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	return patch
}

// KeyMatches says whether key is the one whose hash is hash (in constant time).
func KeyMatches(key, hash string) bool {
	return key != "" && subtle.ConstantTimeCompare([]byte(KeyHash(key)), []byte(hash)) == 1
}

// AgentServiceAccount is the name of the agent ServiceAccount (in AgentIdentityNamespace) of the
// cluster whose cluster namespace is clusterNS.
func AgentServiceAccount(clusterNS string) string { return clusterNS }

// AgentIdentity is the value of IdentityAnnotation on a Cluster whose agent identity is the
// current one: the ServiceAccount as namespace/name.
func AgentIdentity(clusterNS string) string {
	return AgentIdentityNamespace + "/" + AgentServiceAccount(clusterNS)
}

// AgentIdentities is the subject of the bindings every agent shares (ContentReaderBinding,
// ClusterStatusRole's): every ServiceAccount in AgentIdentityNamespace.
func AgentIdentities() rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "system:serviceaccounts:" + AgentIdentityNamespace}
}

// Values are what a registration token hands an agent (the token Secret's "values" key and the
// bootstrap Secret's keys).
type Values struct {
	Token                       string `json:"token"`
	APIServerURL                string `json:"apiServerURL"`
	APIServerCA                 string `json:"apiServerCA"`
	ClusterNamespace            string `json:"clusterNamespace"`
	SystemRegistrationNamespace string `json:"systemRegistrationNamespace"`
	// RegistrationKey (ours) is the Cluster's registration key, when the manager installs the
	// agent itself (KeyHashAnnotation); a token's values have none.
	RegistrationKey string `json:"registrationKey,omitempty"`
}

// ImportServiceAccount names a token's import identity (in the token's namespace).
func ImportServiceAccount(token string) string { return names.SafeConcatName("import", token) }

// ClusterName is the Cluster a clientID registers as.
func ClusterName(clientID string) string {
	return "cluster-" + names.HashPrefix(clientID, 12)
}

// CredentialSecret names the Secret (in the registration namespace) the manager writes an agent's
// credential to: only the agent that chose the nonce can know it.
func CredentialSecret(clientID, random string) string {
	sum := sha256.Sum256([]byte(clientID + random))
	return "c-" + hex.EncodeToString(sum[:])
}

// RequestName names the ClusterRegistration an agent asks with: the same for the same clientID
// and nonce, so a request sent again finds the first (the apiserver refuses it as existing)
// instead of making a second. Nothing of the nonce can be read from it.
func RequestName(clientID, random string) string {
	sum := sha256.Sum256([]byte("request/" + clientID + "/" + random))
	return "request-" + hex.EncodeToString(sum[:10])
}

// SanitizeLabels drops the labels an agent may not set on its Cluster: fleet.cattle.io/ and
// management.cattle.io/ keys belong to the manager and Rancher.
func SanitizeLabels(in map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range in {
		if strings.HasPrefix(k, "fleet.cattle.io/") || strings.HasPrefix(k, "management.cattle.io/") {
			continue
		}
		out[k] = v
	}
	return out
}

// ImportRules are what an import identity may do in its token's namespace.
func ImportRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{fleet.SchemeGroupVersion.Group}, Resources: []string{"clusterregistrations"}, Verbs: []string{"create"}}}
}

// CredentialReaderRules: get (never list) Secrets in the registration namespace.
func CredentialReaderRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get"}}}
}

// AgentRules are what an agent may do in its cluster namespace: read its BundleDeployments, their
// option Secrets and the copies of their downstreamResources (get by name, never list), and write
// their status.
func AgentRules() []rbacv1.PolicyRule {
	g := fleet.SchemeGroupVersion.Group
	return []rbacv1.PolicyRule{
		{APIGroups: []string{g}, Resources: []string{"bundledeployments"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{g}, Resources: []string{"bundledeployments/status"}, Verbs: []string{"update", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get"}},
	}
}

// TokenRules (in AgentIdentityNamespace): create tokens of the ServiceAccount sa, nothing else.
// Bound to the agent itself (renewal), and to the identities in a taken-over cluster namespace
// (trading their credential).
func TokenRules(sa string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, Verbs: []string{"create"},
		ResourceNames: []string{sa}}}
}

// ClusterStatusRules (the ClusterRole ClusterStatusRole) let agents patch the status of the
// Clusters of a namespace where it is bound (one RoleBinding per namespace with registered
// Clusters, for every agent identity). Each agent only its own Cluster's, and only status.agent:
// the admission policy fleet-agent-cluster-status (charts/fleet-crd) holds each agent to the
// Cluster whose IdentityAnnotation names it. One binding per cluster, with the Cluster's name,
// made the apiserver look through as many RoleBindings on every check-in.
func ClusterStatusRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{fleet.SchemeGroupVersion.Group}, Resources: []string{"clusters/status"},
		Verbs: []string{"patch"}}}
}

// ContentReaderRules: get Contents by name (their names are sha256 sums of what they hold).
func ContentReaderRules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{{APIGroups: []string{fleet.SchemeGroupVersion.Group}, Resources: []string{"contents"}, Verbs: []string{"get"}}}
}
