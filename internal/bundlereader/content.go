package bundlereader

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// checkContent fails a bundle whose content the agent could not deploy: a bundle folder that is
// a chart must load as one (Chart.yaml parses and has name and version, values.yaml parses),
// and in a bundle of manifests every YAML file must parse. The error names the file and line.
func checkContent(dir string, files []File, isChart bool) error {
	for _, f := range files {
		if !isManifest(path.Base(f.Name)) || strings.HasSuffix(f.Name, ".json") || bytes.Contains(f.Content, []byte("{{")) ||
			(isChart && strings.HasPrefix(f.Name, "templates/")) {
			continue
		}
		if err := parseYAMLDocs(f.Content); err != nil {
			file := path.Join(dir, f.Name)
			var ie *InputError
			if errors.As(yamlSyntaxError(file, f.Content, err), &ie) {
				return ie
			}
			return err
		}
	}
	if isChart {
		var bf []*loader.BufferedFile
		for _, f := range files {
			bf = append(bf, &loader.BufferedFile{Name: f.Name, Data: f.Content})
		}
		if _, err := loader.LoadFiles(bf); err != nil {
			return &InputError{File: path.Join(dir, "Chart.yaml"), Msg: "the bundle folder is a chart Helm cannot load: " + err.Error()}
		}
	}
	return nil
}

// parseYAMLDocs parses every document of a YAML stream.
func parseYAMLDocs(data []byte) error {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w", err)
		}
	}
}
