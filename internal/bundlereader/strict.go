package bundlereader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
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
func decodeStrict(file string, data []byte, out any) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return yamlSyntaxError(file, data, err)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	jsonData, err := sigsyaml.YAMLToJSON(data)
	if err != nil {
		return yamlSyntaxError(file, data, err)
	}
	dec := json.NewDecoder(bytes.NewReader(jsonData))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fieldError(file, &root, err, out)
	}
	return nil
}

func yamlSyntaxError(file string, data []byte, err error) error {
	msg := strings.TrimPrefix(err.Error(), "error converting YAML to JSON: ")
	if strings.Contains(msg, "did not find expected ',' or '}'") || strings.Contains(msg, "did not find expected ',' or ']'") {
		// The parser names where it gave up; the mistake is the bracket never closed.
		if line, open := unclosedBracket(data); line > 0 {
			return &InputError{File: file, Line: line, Msg: fmt.Sprintf("malformed YAML: this %q is never closed", open)}
		}
	}
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		var line int
		fmt.Sscan(m[1], &line)
		return &InputError{File: file, Line: line, Msg: "malformed YAML: " + m[2]}
	}
	return &InputError{File: file, Msg: "malformed YAML: " + msg}
}

func fieldError(file string, root *yaml.Node, err error, out any) error {
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		msg := "unknown key"
		if near := closestKey(m[1], knownKeys(reflect.TypeOf(out))); near != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", near)
		}
		return &InputError{File: file, Key: m[1], Line: findKeyLine(root, m[1]), Msg: msg}
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

// unclosedBracket finds the innermost flow bracket ({ or [) of data that is never closed, skipping
// quoted strings and comments, and returns its line (0 when all are closed).
func unclosedBracket(data []byte) (int, string) {
	type open struct {
		ch   byte
		line int
	}
	var stack []open
	line := 1
	var quote byte
	comment := false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c == '\n' {
			line++
			comment = false
			continue
		}
		switch {
		case comment:
		case quote == '"':
			if c == '\\' {
				i++
			} else if c == '"' {
				quote = 0
			}
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '#' && (i == 0 || data[i-1] == ' ' || data[i-1] == '\t' || data[i-1] == '\n'):
			comment = true
		case (c == '"' || c == '\'') && (i == 0 || strings.IndexByte(" \t\n{[,:", data[i-1]) >= 0):
			quote = c
		case c == '{' || c == '[':
			stack = append(stack, open{c, line})
		case (c == '}' || c == ']') && len(stack) > 0:
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) == 0 {
		return 0, ""
	}
	last := stack[len(stack)-1]
	return last.line, string(last.ch)
}

// knownKeys are the JSON names of every field reachable from t.
func knownKeys(t reflect.Type) []string {
	seen := map[reflect.Type]bool{}
	var out []string
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map || t.Kind() == reflect.Array {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name != "" && name != "-" {
				out = append(out, name)
			}
			walk(f.Type)
		}
	}
	walk(t)
	return out
}

// closestKey is the known key nearest to key by edit distance, when near enough to be a typo.
func closestKey(key string, known []string) string {
	best, bestDist := "", len(key)/3+2
	for _, k := range known {
		if d := editDistance(strings.ToLower(key), strings.ToLower(k)); d < bestDist {
			best, bestDist = k, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
