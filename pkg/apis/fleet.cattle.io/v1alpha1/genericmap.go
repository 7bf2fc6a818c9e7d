package v1alpha1

import (
	"encoding/json"
	"unique"

	"k8s.io/apimachinery/pkg/runtime"
)

// GenericMap is an arbitrary JSON object, such as Helm values. It is kept as decoded JSON so
// values of any shape round-trip unchanged.
// +k8s:deepcopy-gen=false
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:Type=object
type GenericMap struct {
	Data map[string]any `json:"-"`
	// Compacted holds the map as canonical JSON in place of Data (see Compact); it is never
	// serialized as such.
	Compacted string `json:"-"`
}

// MarshalJSON writes the map itself, not a wrapper object.
func (in GenericMap) MarshalJSON() ([]byte, error) {
	if in.Data == nil {
		if in.Compacted != "" {
			return []byte(in.Compacted), nil
		}
		return []byte("{}"), nil
	}
	return json.Marshal(in.Data)
}

// UnmarshalJSON reads any JSON object.
func (in *GenericMap) UnmarshalJSON(data []byte) error {
	in.Data, in.Compacted = map[string]any{}, ""
	return json.Unmarshal(data, &in.Data)
}

// Compact replaces Data by its canonical JSON (sorted keys), one shared copy per distinct
// content: for holders that only compare and write the map, not read it. Decoded JSON costs
// several times its text in maps and boxed values. Afterwards Data is nil, MarshalJSON writes
// the same JSON as before, and two compacted maps are equal (reflect.DeepEqual) exactly when
// their contents are.
func (in *GenericMap) Compact() {
	if in == nil || in.Data == nil {
		return
	}
	data, err := json.Marshal(in.Data)
	if err != nil {
		return
	}
	in.Data, in.Compacted = nil, unique.Make(string(data)).Value()
}

// DeepCopyInto copies the map recursively; values are JSON-compatible by construction.
func (in *GenericMap) DeepCopyInto(out *GenericMap) {
	out.Data = runtime.DeepCopyJSON(in.Data)
	out.Compacted = in.Compacted
}

// DeepCopy returns a recursive copy.
func (in *GenericMap) DeepCopy() *GenericMap {
	if in == nil {
		return nil
	}
	out := new(GenericMap)
	in.DeepCopyInto(out)
	return out
}

// CompactValues compacts the options' Helm values (see GenericMap.Compact).
func (in *BundleDeploymentOptions) CompactValues() {
	if in != nil && in.Helm != nil {
		in.Helm.Values.Compact()
	}
}
