package target

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"text/template"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// forbiddenFuncs are sprig functions a template in a Bundle may not use: they read the
// manager's environment or the network, or evaluate templates recursively.
var forbiddenFuncs = []string{"env", "expandenv", "include", "tpl", "getHostByName"}

func funcMap() template.FuncMap {
	fm := sprig.TxtFuncMap()
	for _, f := range forbiddenFuncs {
		delete(fm, f)
	}
	return fm
}

// templateContext is what templated values see of the cluster.
func templateContext(c *fleet.Cluster) map[string]any {
	values := map[string]any{}
	if c.Spec.TemplateValues != nil {
		values = c.Spec.TemplateValues.DeepCopy().Data
	}
	return map[string]any{
		"ClusterName":        c.Name,
		"ClusterNamespace":   c.Namespace,
		"ClusterLabels":      stringMap(c.Labels),
		"ClusterAnnotations": stringMap(c.Annotations),
		"ClusterValues":      values,
	}
}

func stringMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Template delimiters, as in Fleet: "{{ }}" in values stays literal text for the chart.
const (
	leftDelim  = "${"
	rightDelim = "}"
)

// clusterLabelPrefix marks a string value Fleet replaces by a cluster label's value.
const clusterLabelPrefix = "global.fleet.clusterLabels."

// RenderValues renders the Helm values of opts for cluster c as Fleet does: the values, as
// YAML, are one template (delimiters "${" and "}") over the cluster's name, namespace, labels,
// annotations and template values (unless helm.disablePreProcess); helm.templateValues are
// rendered and laid over them; and any string value "global.fleet.clusterLabels.KEY", at any
// depth, becomes the value of the cluster's label KEY (empty when it has none).
func RenderValues(opts *fleet.BundleDeploymentOptions, c *fleet.Cluster) error {
	h := opts.Helm
	if h == nil {
		return nil
	}
	ctx := templateContext(c)
	values := map[string]any{}
	if h.Values != nil {
		values = h.Values.DeepCopy().Data
	}
	if !h.DisablePreProcess && len(values) > 0 {
		data, err := valuesYAML(values)
		if err != nil {
			return err
		}
		rendered, err := render("helm.values", data, ctx)
		if err != nil {
			return err
		}
		values = map[string]any{}
		if err := yaml.Unmarshal([]byte(rendered), &values); err != nil {
			return fmt.Errorf("helm.values: the rendered template is not valid YAML: %w", err)
		}
	}
	for key, tmpl := range h.TemplateValues {
		rendered, err := render("helm.templateValues."+key, tmpl, ctx)
		if err != nil {
			return err
		}
		var v any
		if err := yaml.Unmarshal([]byte(rendered), &v); err != nil {
			return fmt.Errorf("helm.templateValues.%s: the rendered template is not valid YAML: %w", key, err)
		}
		values[key] = v
	}
	values = replaceLabelRefs(values, c.Labels).(map[string]any)
	h.Values = &fleet.GenericMap{Data: values}
	h.TemplateValues = nil
	return nil
}

// replaceLabelRefs returns v with every string "global.fleet.clusterLabels.KEY" replaced by
// labels[KEY], in maps and lists at any depth.
func replaceLabelRefs(v any, labels map[string]string) any {
	switch t := v.(type) {
	case string:
		if key, ok := strings.CutPrefix(t, clusterLabelPrefix); ok {
			return labels[key]
		}
	case map[string]any:
		for k, e := range t {
			t[k] = replaceLabelRefs(e, labels)
		}
	case []any:
		for i, e := range t {
			t[i] = replaceLabelRefs(e, labels)
		}
	}
	return v
}

// memo is a small cache bounded by the bytes of its keys and values: emptied when full.
type memo[V any] struct {
	mu    sync.Mutex
	m     map[string]V
	bytes int
}

// memoBudget bounds each cache: enough for the values of many Bundles, small next to the
// manager's object caches.
const memoBudget = 4 << 20

func (c *memo[V]) get(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[key]
	return v, ok
}

func (c *memo[V]) put(key string, v V, size int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || c.bytes+size > memoBudget {
		c.m, c.bytes = map[string]V{}, 0
	}
	c.m[key] = v
	c.bytes += size
}

// yamlOf caches the YAML form of values by their JSON form: a Bundle renders the same values
// for every cluster, and JSON is several times cheaper to produce than YAML.
var yamlOf memo[string]

func valuesYAML(values map[string]any) (string, error) {
	key, err := json.Marshal(values)
	if err != nil {
		return "", err
	}
	if y, ok := yamlOf.get(string(key)); ok {
		return y, nil
	}
	data, err := yaml.JSONToYAML(key)
	if err != nil {
		return "", err
	}
	yamlOf.put(string(key), string(data), len(key)+len(data))
	return string(data), nil
}

// parsed keeps parsed templates by their text: the same values are rendered for every cluster,
// and building sprig's function map and parsing cost far more than executing.
var parsed memo[*template.Template]

func parse(text string) (*template.Template, error) {
	if t, ok := parsed.get(text); ok {
		return t, nil
	}
	t, err := template.New("value").Delims(leftDelim, rightDelim).Funcs(funcMap()).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	// A parsed template takes a few times its text.
	parsed.put(text, t, 4*len(text))
	return t, nil
}

func render(name, text string, ctx map[string]any) (string, error) {
	if !strings.Contains(text, leftDelim) {
		return text, nil
	}
	t, err := parse(text)
	if err != nil {
		return "", fmt.Errorf("%s: invalid template: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, ctx); err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	return buf.String(), nil
}

// TemplatedFile says whether a decrypted file holds "${ }" templates.
func TemplatedFile(plain []byte) bool { return bytes.Contains(plain, []byte(leftDelim)) }

// RenderFile renders a decrypted SOPS file for cluster c: the file is one template, as Helm
// values are (delimiters "${" and "}", the same cluster context). It is parsed afresh and not
// kept: a secret's text stays in no memo.
func RenderFile(name string, plain []byte, c *fleet.Cluster) ([]byte, error) {
	t, err := template.New(name).Delims(leftDelim, rightDelim).Funcs(funcMap()).Option("missingkey=error").Parse(string(plain))
	if err != nil {
		return nil, fmt.Errorf("%s: invalid template: %w", name, err)
	}
	var buf bytes.Buffer
	if err := t.Execute(&buf, templateContext(c)); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return buf.Bytes(), nil
}

// ContextHash fingerprints what a cluster's templates see of it (name, namespace, labels,
// annotations, template values): a templated file is rendered again when it changes.
func ContextHash(c *fleet.Cluster) string {
	data, _ := json.Marshal(templateContext(c))
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}
