package v1alpha1

import (
	"encoding/json"
	"testing"
)

func TestGenericMapCompact(t *testing.T) {
	m := &GenericMap{Data: map[string]any{"b": map[string]any{"x": []any{1.5, "y"}}, "a": true}}
	before, _ := json.Marshal(m)
	m.Compact()
	if m.Data != nil || m.Compacted != `{"a":true,"b":{"x":[1.5,"y"]}}` {
		t.Fatalf("compacted to canonical JSON: %+v", m)
	}
	after, _ := json.Marshal(m)
	if string(after) != string(before) {
		t.Fatalf("writes the same JSON: %s, was %s", after, before)
	}
	if c := m.DeepCopy(); c.Compacted != m.Compacted {
		t.Fatal("a copy keeps the compacted form")
	}
	var back GenericMap
	if err := json.Unmarshal(after, &back); err != nil || back.Compacted != "" || back.Data["a"] != true {
		t.Fatalf("reading JSON decodes it: %+v %v", back, err)
	}
	var empty *GenericMap
	empty.Compact() // no panic
	(&GenericMap{}).Compact()
}
