// Command codegen regenerates everything derived from the API types: deepcopy functions, the
// scheme registration and List types, wrangler's typed controllers, clients and caches (on a lasso
// shared factory) under pkg/generated, and the CRDs in charts/fleet-crd/templates/crds.yaml.
// It runs from the module root through `go generate ./...` (see main.go).
package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"

	"sigs.k8s.io/yaml"

	controllergen "github.com/rancher/wrangler/v3/pkg/controller-gen"
	"github.com/rancher/wrangler/v3/pkg/controller-gen/args"
	"github.com/sirupsen/logrus"
)

const (
	module     = "github.com/fleetgo/fleet"
	apiDir     = "./pkg/apis/fleet.cattle.io/v1alpha1"
	crdOutFile = "charts/fleet-crd/templates/crds.yaml"
)

func main() {
	controllergen.Run(args.Options{
		OutputPackage: module + "/pkg/generated",
		Boilerplate:   "pkg/codegen/boilerplate.go.txt",
		Groups: map[string]args.Group{
			"fleet.cattle.io": {
				Types:         []any{apiDir},
				GenerateTypes: true,
			},
		},
	})
	if err := generateCRDs(); err != nil {
		logrus.Fatalf("generating CRDs: %v", err)
	}
}

// generateCRDs runs controller-gen (sigs.k8s.io/controller-tools, pinned in go.mod) over the API
// package and joins its one-file-per-CRD output, in name order, into the fleet-crd chart.
func generateCRDs() error {
	tmp, err := os.MkdirTemp("", "fleet-crds-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "run", "sigs.k8s.io/controller-tools/cmd/controller-gen",
		"crd:crdVersions=v1", "paths="+apiDir+"/...", "output:crd:dir="+tmp)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("controller-gen: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(tmp, "*.yaml"))
	if err != nil {
		return err
	}
	sort.Strings(files)
	var out bytes.Buffer
	out.WriteString("# Generated from pkg/apis/fleet.cattle.io/v1alpha1 by pkg/codegen. DO NOT EDIT.\n")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if data, err = restrictSelectorOperators(data); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		out.Write(bytes.TrimPrefix(data, []byte("---\n")))
		if !bytes.HasSuffix(data, []byte("\n")) {
			out.WriteString("\n")
		}
		out.WriteString("---\n")
	}
	if err := os.MkdirAll(filepath.Dir(crdOutFile), 0o755); err != nil {
		return err
	}
	return os.WriteFile(crdOutFile, bytes.TrimSuffix(out.Bytes(), []byte("---\n")), 0o644)
}

// labelSelectorOperators are the operators a metav1.LabelSelector accepts.
var labelSelectorOperators = []any{"In", "NotIn", "Exists", "DoesNotExist"}

// restrictSelectorOperators adds an enum to the operator of every label selector in a CRD, so
// the apiserver rejects an invalid operator with the field's path. metav1.LabelSelector is an
// external type that takes no markers, and a CEL rule over nested unbounded lists exceeds the
// apiserver's cost budget; an enum costs nothing. A label selector is recognised as an object
// with both matchLabels and matchExpressions (node selectors, whose operators differ, have no
// matchLabels).
func restrictSelectorOperators(data []byte) ([]byte, error) {
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return nil, err
	}
	var walk func(v any)
	walk = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			if props, ok := t["properties"].(map[string]any); ok {
				if _, hasLabels := props["matchLabels"]; hasLabels {
					if exprs, ok := props["matchExpressions"].(map[string]any); ok {
						if items, ok := exprs["items"].(map[string]any); ok {
							if itemProps, ok := items["properties"].(map[string]any); ok {
								if op, ok := itemProps["operator"].(map[string]any); ok {
									op["enum"] = labelSelectorOperators
								}
							}
						}
					}
				}
			}
			for _, c := range t {
				walk(c)
			}
		case []any:
			for _, c := range t {
				walk(c)
			}
		}
	}
	walk(crd)
	return yaml.Marshal(crd)
}
