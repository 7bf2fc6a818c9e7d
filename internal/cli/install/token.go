// Package install holds `fleet install agent-token`: it asks a live manager for a registration
// token and renders the agent's manifest with it.
package install

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/charts"
	"github.com/fleetgo/fleet/internal/chartrender"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// AgentTokenOptions are `fleet install agent-token`'s.
type AgentTokenOptions struct {
	// Namespace of the token: the namespace the clusters register into.
	Namespace, Name string
	TTL             time.Duration
	// ServerURL and CAFile override what the manager's configuration hands out; NoCA hands out
	// no CA (the manager's certificate is trusted by the system roots).
	ServerURL, CAFile string
	NoCA              bool
	SystemNamespace   string
	AgentImage        string
	// Group names a ClusterGroup in Namespace: clusters registered with the token get the
	// labels its selector matches, so they join it.
	Group string
	// LabelKeys (with Group) are the label keys whose values the registering agent may choose
	// (its agent-config labels); of the rest it sets none.
	LabelKeys []string
	// Cluster names a Cluster made ahead of time (with spec.clientID) in Namespace: the manifest
	// carries a new registration key for it, whose hash the Cluster is given, so that only the
	// agent installed with it registers as that Cluster.
	Cluster string
	// Timeout bounds the wait for the manager to issue the token.
	Timeout time.Duration
}

// Registration tokens `fleet install agent-token` makes: valid DefaultAgentTokenTTL unless the
// options say otherwise; their values are looked for every tokenPoll, for at most tokenTimeout.
const (
	DefaultAgentTokenTTL = 12 * time.Hour
	tokenPoll            = 200 * time.Millisecond
	tokenTimeout         = time.Minute
)

// AgentToken creates a ClusterRegistrationToken on the manager, waits for its values and
// renders the fleet-agent chart with them: the manifest to apply to a downstream cluster.
func AgentToken(ctx context.Context, api fleetcontrollers.Interface, kube kubernetes.Interface, o AgentTokenOptions) (string, error) {
	groupLabels, err := groupLabelsOf(api, o)
	if err != nil {
		return "", err
	}
	if len(o.LabelKeys) > 0 && o.Group == "" {
		return "", fmt.Errorf("--label-keys restricts the labels of a --group token: without --group the agent sets any label")
	}
	v, err := issueToken(ctx, api, kube, o, groupLabels)
	if err != nil {
		return "", err
	}
	if o.ServerURL != "" {
		v.APIServerURL = o.ServerURL
	}
	if o.CAFile != "" {
		ca, err := os.ReadFile(o.CAFile)
		if err != nil {
			return "", fmt.Errorf("--ca-file: %w", err)
		}
		v.APIServerCA = string(ca)
	}
	if o.NoCA {
		v.APIServerCA = ""
	}
	if v.APIServerURL == "" {
		return "", fmt.Errorf("the manager has no apiServerURL configured (fleet-controller ConfigMap): pass --server-url")
	}
	if v.RegistrationKey, err = keyFor(api, o); err != nil {
		return "", err
	}
	values := map[string]any{"token": v.Token, "apiServerURL": v.APIServerURL, "apiServerCA": v.APIServerCA,
		"clusterNamespace": v.ClusterNamespace, "systemRegistrationNamespace": v.SystemRegistrationNamespace,
		"registrationKey": v.RegistrationKey, "createNamespace": true, "agentConfig": false, "groupLabels": groupLabels}
	if err := chartrender.SetImage(values, "image", o.AgentImage); err != nil {
		return "", err
	}
	return chartrender.Render(charts.Agent, "fleet-agent", o.SystemNamespace, values)
}

// keyFor gives the Cluster --cluster names a new registration key, recording its hash on the
// Cluster, and returns it ("" without --cluster). A key the Cluster held before no longer
// registers it.
func keyFor(api fleetcontrollers.Interface, o AgentTokenOptions) (string, error) {
	if o.Cluster == "" {
		return "", nil
	}
	c, err := api.Cluster().Get(o.Namespace, o.Cluster, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("--cluster %s: %w", o.Cluster, err)
	}
	if c.Spec.ClientID == "" {
		return "", fmt.Errorf("--cluster %s: cluster %s/%s has no spec.clientID: an agent registers as the Cluster of its clientID, so set one (and give the agent the same, fleet install agent-config --client-id)",
			o.Cluster, o.Namespace, o.Cluster)
	}
	key, hash, err := registration.NewKey()
	if err != nil {
		return "", err
	}
	if _, err := api.Cluster().Patch(o.Namespace, o.Cluster, types.MergePatchType, registration.KeyPatch(hash, false)); err != nil {
		return "", fmt.Errorf("--cluster %s: recording its registration key: %w", o.Cluster, err)
	}
	return key, nil
}

// groupLabelsOf are the labels --group's ClusterGroup selects by, which registering clusters are
// given (none without --group).
func groupLabelsOf(api fleetcontrollers.Interface, o AgentTokenOptions) (map[string]any, error) {
	if o.Group == "" {
		return nil, nil
	}
	g, err := api.ClusterGroup().Get(o.Namespace, o.Group, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("--group %s: %w", o.Group, err)
	}
	if g.Spec.Selector == nil || len(g.Spec.Selector.MatchLabels) == 0 || len(g.Spec.Selector.MatchExpressions) > 0 {
		return nil, fmt.Errorf("--group %s: cluster group %s/%s must select clusters by matchLabels only, so that registered clusters can be given them", o.Group, o.Namespace, o.Group)
	}
	labels := map[string]any{}
	for k, v := range g.Spec.Selector.MatchLabels {
		labels[k] = v
	}
	return labels, nil
}

// issueToken creates a ClusterRegistrationToken and waits for the values the manager issues for
// it.
func issueToken(ctx context.Context, api fleetcontrollers.Interface, kube kubernetes.Interface, o AgentTokenOptions,
	groupLabels map[string]any) (registration.Values, error) {
	var v registration.Values
	tok := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name}}
	if groupLabels != nil {
		// The manager gives the token's Clusters these labels and, of what the agent asks
		// for, only labels of the listed keys.
		restrict, err := json.Marshal(groupLabels)
		if err != nil {
			return v, err
		}
		tok.Annotations = map[string]string{registration.ClusterLabelsAnnotation: string(restrict)}
		if len(o.LabelKeys) > 0 {
			tok.Annotations[registration.ClusterLabelKeysAnnotation] = strings.Join(o.LabelKeys, ",")
		}
	}
	if o.Name == "" {
		tok.GenerateName = "token-"
	}
	if o.TTL > 0 {
		tok.Spec.TTL = &metav1.Duration{Duration: o.TTL}
	}
	created, err := api.ClusterRegistrationToken().Create(tok)
	if err != nil {
		return v, fmt.Errorf("creating a registration token in namespace %s: %w", o.Namespace, err)
	}
	timeout := o.Timeout
	if timeout <= 0 {
		timeout = tokenTimeout
	}
	err = wait.PollUntilContextTimeout(ctx, tokenPoll, timeout, true, func(ctx context.Context) (bool, error) {
		t, err := api.ClusterRegistrationToken().Get(created.Namespace, created.Name, metav1.GetOptions{})
		if err != nil || t.Status.SecretName == "" {
			return false, nil
		}
		s, err := kube.CoreV1().Secrets(t.Namespace).Get(ctx, t.Status.SecretName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return true, yaml.Unmarshal(s.Data[registration.ValuesKey], &v)
	})
	if err != nil {
		return v, fmt.Errorf("waiting for the manager to issue registration token %s/%s (is fleet controller running?): %w", created.Namespace, created.Name, err)
	}
	return v, nil
}
