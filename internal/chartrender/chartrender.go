// Package chartrender renders the embedded charts into manifests, as Helm would install them: the
// manager renders the agent's chart for clusters it deploys agents to, and `fleet install` prints
// the manager's and the agent's manifests.
package chartrender

import (
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"

	"github.com/fleetgo/fleet/charts"
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
	if err := SetImage(values, "image", o.ControllerImage); err != nil {
		return "", err
	}
	if err := SetImage(values, "agentImage", o.AgentImage); err != nil {
		return "", err
	}
	manager, err := Render(charts.Fleet, "fleet", o.SystemNamespace, values)
	if err != nil {
		return "", err
	}
	return crds + manager, nil
}

// SetImage sets key.repository and key.tag from "repository[:tag]".
func SetImage(values map[string]any, key, image string) error {
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
