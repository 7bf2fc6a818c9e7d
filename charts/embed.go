// Package charts holds the fleet-crd, fleet and fleet-agent charts, embedded in the fleet
// binary so `fleet install` renders from the same charts Helm installs.
package charts

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/fleetgo/fleet/internal/version"
)

//go:embed all:fleet-crd all:fleet all:fleet-agent
var files embed.FS

// Names of the charts.
const (
	CRD   = "fleet-crd"
	Fleet = "fleet"
	Agent = "fleet-agent"
)

// Load returns one of the embedded charts. A released binary stamps its own version as the
// chart's appVersion, the image tag the charts use by default, as `make charts` does for the
// packaged charts: `fleet install` and `helm install` then run the same image.
func Load(name string) (*chart.Chart, error) {
	var buffered []*loader.BufferedFile
	err := fs.WalkDir(files, name, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		buffered = append(buffered, &loader.BufferedFile{Name: strings.TrimPrefix(p, name+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("chart %s: %w", name, err)
	}
	if len(buffered) == 0 {
		return nil, fmt.Errorf("chart %s: not embedded", path.Clean(name))
	}
	c, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, err
	}
	if version.Version != "dev" {
		c.Metadata.AppVersion = version.Version
	}
	return c, nil
}

// KnownHosts are the SSH host keys the fleet chart ships in its ConfigMap known-hosts: those
// GitHub, GitLab, Bitbucket and Azure DevOps publish.
func KnownHosts() []byte {
	data, _ := files.ReadFile("fleet/known_hosts")
	return data
}
