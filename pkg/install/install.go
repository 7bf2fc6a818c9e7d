// Package install renders the embedded charts into manifests for `fleet install`, and creates
// registration tokens on a live manager for `fleet install agent-token`.
package install

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/charts"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/fleetgo/fleet/pkg/registration"
)

// Render renders an embedded chart as Helm would install it into namespace, CRDs included,
// and returns the manifest (YAML documents in install order).
func Render(chartName, releaseName, namespace string, values map[string]any) (string, error) {
	c, err := charts.Load(chartName)
	if err != nil {
		return "", err
	}
	cfg := &action.Configuration{Capabilities: chartutil.DefaultCapabilities}
	in := action.NewInstall(cfg)
	in.DryRun, in.ClientOnly, in.IncludeCRDs, in.Replace = true, true, true, true
	in.ReleaseName, in.Namespace = releaseName, namespace
	rel, err := in.Run(c, values)
	if err != nil {
		return "", fmt.Errorf("rendering chart %s: %w", chartName, err)
	}
	var b strings.Builder
	manifests := releaseutil.SplitManifests(rel.Manifest)
	_, sorted, err := releaseutil.SortManifests(manifests, nil, releaseutil.InstallOrder)
	if err != nil {
		return "", err
	}
	for _, m := range sorted {
		b.WriteString("---\n")
		b.WriteString(strings.TrimSpace(m.Content))
		b.WriteString("\n")
	}
	return b.String(), nil
}

// ControllerOptions are `fleet install controller`'s.
type ControllerOptions struct {
	ControllerImage, AgentImage string
	CRDsOnly                    bool
	SystemNamespace             string
}

// Controller renders the manager: the fleet-crd and fleet charts (only fleet-crd with CRDsOnly).
func Controller(o ControllerOptions) (string, error) {
	crds, err := Render(charts.CRD, "fleet-crd", o.SystemNamespace, nil)
	if err != nil || o.CRDsOnly {
		return crds, err
	}
	values := map[string]any{"createNamespace": true}
	if err := setImage(values, "image", o.ControllerImage); err != nil {
		return "", err
	}
	if err := setImage(values, "agentImage", o.AgentImage); err != nil {
		return "", err
	}
	manager, err := Render(charts.Fleet, "fleet", o.SystemNamespace, values)
	if err != nil {
		return "", err
	}
	return crds + manager, nil
}

// setImage sets key.repository and key.tag from "repository[:tag]".
func setImage(values map[string]any, key, image string) error {
	if image == "" {
		return nil
	}
	repo, tag := SplitImage(image)
	if repo == "" {
		return fmt.Errorf("image %q: no repository", image)
	}
	values[key] = map[string]any{"repository": repo, "tag": tag}
	return nil
}

// SplitImage splits "repository[:tag]" (a registry's port is not a tag).
func SplitImage(image string) (repo, tag string) {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i], image[i+1:]
	}
	return image, ""
}

// AgentConfigOptions are `fleet install agent-config`'s.
type AgentConfigOptions struct {
	Labels          map[string]string
	ClientID        string
	SystemNamespace string
}

// AgentConfig renders the agent ConfigMap (labels and clientID used at registration).
func AgentConfig(o AgentConfigOptions) (string, error) {
	labels := map[string]any{}
	for k, v := range o.Labels {
		labels[k] = v
	}
	return Render(charts.Agent, "fleet-agent", o.SystemNamespace, map[string]any{
		"configOnly": true, "createNamespace": true, "labels": labels, "clientID": o.ClientID})
}

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
	values := map[string]any{"token": v.Token, "apiServerURL": v.APIServerURL, "apiServerCA": v.APIServerCA,
		"clusterNamespace": v.ClusterNamespace, "systemRegistrationNamespace": v.SystemRegistrationNamespace,
		"createNamespace": true, "agentConfig": false, "groupLabels": groupLabels}
	if err := setImage(values, "image", o.AgentImage); err != nil {
		return "", err
	}
	return Render(charts.Agent, "fleet-agent", o.SystemNamespace, values)
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
		// The manager gives the token's Clusters these labels and no others, whatever the
		// agent asks for.
		restrict, err := json.Marshal(groupLabels)
		if err != nil {
			return v, err
		}
		tok.Annotations = map[string]string{registration.ClusterLabelsAnnotation: string(restrict)}
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
