// Package deploy is `fleet deploy`: it installs a BundleDeployment with its Content into the
// cluster it is pointed at, as the agent would, or with DryRun prints the manifests it would
// install. (CLI)
package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/helmdeployer"
	"github.com/fleetgo/fleet/internal/render"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Options of a deploy.
type Options struct {
	// InputFile holds the BundleDeployment and its Content (YAML, several documents).
	InputFile string
	// DryRun prints the manifests instead of installing them.
	DryRun bool
	// Config reaches the cluster to deploy to; AgentNamespace is where its agent runs (its
	// ServiceAccounts are the bundle's to act as).
	Config         *rest.Config
	AgentNamespace string
}

// Run deploys (or prints) the BundleDeployment of the input file.
func Run(ctx context.Context, o Options, out io.Writer) error {
	bd, resources, err := read(o.InputFile)
	if err != nil {
		return err
	}
	opts := bd.Spec.Options
	if o.DryRun {
		manifest, err := render.Manifests(resources, &opts, bd.Name)
		if err != nil {
			return err
		}
		_, err = io.WriteString(out, manifest)
		return err
	}
	d, err := helmdeployer.New(o.Config, o.AgentNamespace)
	if err != nil {
		return err
	}
	files, err := render.FromResources(resources)
	if err != nil {
		return err
	}
	values, hash, err := d.Values(ctx, &opts)
	if err != nil {
		return err
	}
	rel, err := d.Deploy(ctx, helmdeployer.Input{BundleID: bd.Name, DeploymentID: bd.Spec.DeploymentID, Files: files, Options: opts,
		Values: values, ValuesHash: hash})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "deployed release %s\n", rel)
	return nil
}

// read takes the BundleDeployment and the resources of its Content from the input file.
func read(file string) (*fleet.BundleDeployment, []fleet.BundleResource, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	var in inputs
	dec := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err == nil {
			err = in.take(doc)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	bd, content := in.bd, in.content
	if bd == nil || content == nil {
		return nil, nil, fmt.Errorf("%s: needs a BundleDeployment and its Content (kubectl get bundledeployment,content -o yaml)", file)
	}
	res, err := bundlereader.ContentResources(content)
	if err != nil {
		return nil, nil, err
	}
	return bd, res, nil
}

// inputs are the objects deploy reads from its input file.
type inputs struct {
	bd      *fleet.BundleDeployment
	content *fleet.Content
}

// take reads one object, or the items of a List (what kubectl get -o yaml prints).
func (in *inputs) take(doc []byte) error {
	var head struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := sigsyaml.Unmarshal(doc, &head); err != nil {
		return err
	}
	switch head.Kind {
	case "List":
		for _, item := range head.Items {
			if err := in.take(item); err != nil {
				return err
			}
		}
	case "BundleDeployment":
		in.bd = &fleet.BundleDeployment{}
		return sigsyaml.Unmarshal(doc, in.bd)
	case "Content":
		in.content = &fleet.Content{}
		return sigsyaml.Unmarshal(doc, in.content)
	}
	return nil
}
