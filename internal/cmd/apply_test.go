package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Every flag of Fleet's fleet apply, with its short form, so users' scripts keep working.
func TestApplyHelpListsEveryFleetFlag(t *testing.T) {
	out, err := runRoot(t, "apply", "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{
		"-b, --bundle-file", "--cacerts-file", "--commit", "-c, --compress", "--context",
		"--correct-drift", "--correct-drift-force", "--correct-drift-keep-fail-history", "--debug",
		"--debug-level", "--delete-namespace", "-f, --file", "--helm-credentials-by-path-file",
		"--helm-repo-url-regex", "--keep-resources", "-k, --kubeconfig", "-l, --label strings",
		"-n, --namespace", "--oci-basic-http", "--oci-insecure", "--oci-password-file", "--oci-reference",
		"--ociusername", "--oci-registry-secret", "-o, --output", "--password-file", "--paused",
		"-a, --service-account", "--ssh-privatekey-file", "--sync-generation", "--target-namespace",
		"--targets-file", "--username", "--driven-scan", "--driven-scan-sep", "--bundle-creation-max-concurrency",
		"--helm-basic-http", "--helm-insecure-skip-tls",
	} {
		if !strings.Contains(out, flag+" ") {
			t.Errorf("fleet apply --help lacks %q", flag)
		}
	}
}

func decodeBundles(t *testing.T, out string) []fleet.Bundle {
	t.Helper()
	var bs []fleet.Bundle
	var yamlOnly []string
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "warning: ") {
			yamlOnly = append(yamlOnly, l)
		}
	}
	for _, doc := range strings.Split(strings.Join(yamlOnly, "\n"), "\n---\n") {
		if strings.TrimSpace(doc) == "" || strings.TrimSpace(doc) == "---" {
			continue
		}
		var b fleet.Bundle
		if err := yaml.Unmarshal([]byte(doc), &b); err != nil {
			t.Fatalf("%v in %q", err, doc)
		}
		if b.Name != "" {
			bs = append(bs, b)
		}
	}
	return bs
}

func TestApplyFleetFlags(t *testing.T) {
	root := t.TempDir()
	for name, data := range map[string]string{
		"app/fleet.yaml": "defaultNamespace: app\n",
		"app/dev.yaml":   "defaultNamespace: dev\n",
		"app/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
	} {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := runRoot(t, "apply", "--root", root, "-o", "-", "-l", "a=1,b=2", "-a", "deployer", "-c",
		"--sync-generation", "3", "--commit", "abc", "repo", "app")
	if err != nil {
		t.Fatal(err)
	}
	bs := decodeBundles(t, out)
	if len(bs) != 1 {
		t.Fatalf("%d bundles:\n%s", len(bs), out)
	}
	b := bs[0]
	if b.Name != "repo-app" || b.Labels["a"] != "1" || b.Labels["b"] != "2" || b.Labels[fleet.CommitLabel] != "abc" {
		t.Errorf("name %s labels %v", b.Name, b.Labels)
	}
	if b.Spec.ServiceAccount != "deployer" || b.Spec.ForceSyncGeneration != 3 || b.Spec.Resources[0].Encoding == "" {
		t.Errorf("spec %+v", b.Spec.BundleDeploymentOptions)
	}

	// -b: another options file, part of the name.
	out, err = runRoot(t, "apply", "--root", root, "-o", "-", "-b", "dev.yaml", "repo", "app")
	if err != nil {
		t.Fatal(err)
	}
	if bs := decodeBundles(t, out); len(bs) != 1 || bs[0].Name != "repo-app-dev" || bs[0].Spec.DefaultNamespace != "dev" {
		t.Errorf("-b dev.yaml:\n%s", out)
	}

	// --driven-scan with another separator.
	out, err = runRoot(t, "apply", "--root", root, "-o", "-", "--driven-scan", "--driven-scan-sep", "+", "repo", "app+dev.yaml", "app")
	if err != nil {
		t.Fatal(err)
	}
	if bs := decodeBundles(t, out); len(bs) != 2 || bs[0].Name != "repo-app" || bs[1].Name != "repo-app-dev" {
		t.Errorf("--driven-scan:\n%s", out)
	}

	// -f: one whole Bundle from a file, written under the given name.
	bf := filepath.Join(t.TempDir(), "bundle.yaml")
	if err := os.WriteFile(bf, []byte("apiVersion: fleet.cattle.io/v1alpha1\nkind: Bundle\nmetadata: {name: other}\nspec:\n  defaultNamespace: whole\n  resources:\n  - name: cm.yaml\n    content: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = runRoot(t, "apply", "-o", "-", "-n", "ns1", "-f", bf, "whole")
	if err != nil {
		t.Fatal(err)
	}
	if bs := decodeBundles(t, out); len(bs) != 1 || bs[0].Name != "whole" || bs[0].Namespace != "ns1" || bs[0].Spec.DefaultNamespace != "whole" {
		t.Errorf("-f:\n%s", out)
	}
	if _, err := runRoot(t, "apply", "-o", "-", "-f", bf, "whole", "app"); err == nil {
		t.Error("-f with paths must be refused")
	}
}

// The targets file is Fleet's: targets and targetRestrictions, both added to every Bundle.
func TestApplyTargetsFileInFleetFormat(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "app"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "app", "cm.yaml"), []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tf := filepath.Join(t.TempDir(), "targets.yaml")
	if err := os.WriteFile(tf, []byte("targets:\n- name: prod\n  clusterGroup: prod\ntargetRestrictions:\n- name: prod\n  clusterGroup: prod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runRoot(t, "apply", "--root", root, "-o", "-", "--targets-file", tf, "repo", "app")
	if err != nil {
		t.Fatal(err)
	}
	bs := decodeBundles(t, out)
	if len(bs) != 1 || len(bs[0].Spec.Targets) != 1 || bs[0].Spec.Targets[0].ClusterGroup != "prod" ||
		len(bs[0].Spec.TargetRestrictions) != 1 || bs[0].Spec.TargetRestrictions[0].ClusterGroup != "prod" {
		t.Fatalf("targets and restrictions:\n%s", out)
	}
}
