package bundlereader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
	sigsyaml "sigs.k8s.io/yaml"
)

// InputError is a problem with a file of the repository: it names the file and, when known, the
// line and the key.
type InputError struct {
	File string
	Line int
	Key  string
	Msg  string
}

func (e *InputError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	if e.Key != "" {
		fmt.Fprintf(&b, ": key %q", e.Key)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

var (
	unknownField = regexp.MustCompile(`unknown field "([^"]+)"`)
	// json type errors name the Go field path, e.g. "Go struct field HelmOptions.helm.timeoutSeconds".
	typeField  = regexp.MustCompile(`Go struct field [A-Za-z0-9_]+\.([A-Za-z0-9_.]+) of type (\S+)`)
	yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// decodeStrict decodes YAML into out, rejecting unknown keys and wrong types with an InputError
// that names the file, the key and its line.
func decodeStrict(file string, data []byte, out interface{}) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return yamlSyntaxError(file, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	jsonData, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return yamlSyntaxError(file, err)
	}
	dec := json.NewDecoder(bytes.NewReader(jsonData))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fieldError(file, &root, err)
	}
	return nil
}

func yamlSyntaxError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		var line int
		fmt.Sscan(m[1], &line)
		return &InputError{File: file, Line: line, Msg: "malformed YAML: " + m[2]}
	}
	return &InputError{File: file, Msg: "malformed YAML: " + msg}
}

func fieldError(file string, root *yaml.Node, err error) error {
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		return &InputError{File: file, Key: m[1], Line: findKeyLine(root, m[1]), Msg: "unknown key"}
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		path := typeErr.Field
		want := typeErr.Type.String()
		if m := typeField.FindStringSubmatch(err.Error()); m != nil {
			path, want = m[1], m[2]
		}
		path = jsonPath(path)
		return &InputError{File: file, Key: path, Line: findPathLine(root, path),
			Msg: fmt.Sprintf("invalid value: %s where %s is expected", typeErr.Value, want)}
	}
	return &InputError{File: file, Msg: err.Error()}
}

// findKeyLine returns the line of the first mapping key with this name, depth first.
func findKeyLine(n *yaml.Node, key string) int {
	if n == nil {
		return 0
	}
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				return n.Content[i].Line
			}
		}
	}
	for _, c := range n.Content {
		if l := findKeyLine(c, key); l > 0 {
			return l
		}
	}
	return 0
}

// findPathLine follows a dotted key path (sequence indexes are skipped by searching every
// element) and returns the line of its last key.
func findPathLine(n *yaml.Node, path string) int {
	keys := strings.Split(path, ".")
	var walk func(n *yaml.Node, keys []string) int
	walk = func(n *yaml.Node, keys []string) int {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if l := walk(c, keys); l > 0 {
					return l
				}
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				if l := walk(c, keys); l > 0 {
					return l
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value != keys[0] {
					continue
				}
				if len(keys) == 1 {
					return n.Content[i].Line
				}
				return walk(n.Content[i+1], keys[1:])
			}
		}
		return 0
	}
	if l := walk(n, keys); l > 0 {
		return l
	}
	return findKeyLine(n, keys[len(keys)-1])
}

// jsonPath drops the Go names of embedded structs from a decoder's field path, leaving the keys
// as they appear in the YAML ("BundleSpec.helm.chart" becomes "helm.chart").
func jsonPath(p string) string {
	var keys []string
	for _, k := range strings.Split(p, ".") {
		if k != "" && (k[0] < 'A' || k[0] > 'Z') {
			keys = append(keys, k)
		}
	}
	return strings.Join(keys, ".")
}
