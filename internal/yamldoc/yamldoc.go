// Package yamldoc writes Kubernetes objects as the CLI prints them: multi-document YAML without
// status, since the objects shown are proposals that no controller has seen yet.
package yamldoc

import (
	"io"

	"sigs.k8s.io/yaml"
)

// WriteYAML writes each object as a YAML document, leaving out its status.
func WriteYAML(w io.Writer, objs ...any) error {
	for _, o := range objs {
		raw, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(raw, &m); err != nil {
			return err
		}
		delete(m, "status")
		data, err := yaml.Marshal(m)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, "---\n"); err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}
