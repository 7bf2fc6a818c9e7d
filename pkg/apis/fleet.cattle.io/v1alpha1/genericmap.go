package v1alpha1

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime"
)

// GenericMap is an arbitrary JSON object, such as Helm values. It is kept as decoded JSON so
// values of any shape round-trip unchanged.
// +k8s:deepcopy-gen=false
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:Type=object
type GenericMap struct {
	Data map[string]interface{} `json:"-"`
}

// MarshalJSON writes the map itself, not a wrapper object.
func (in GenericMap) MarshalJSON() ([]byte, error) {
	if in.Data == nil {
		return []byte("{}"), nil
	}
	return json.Marshal(in.Data)
}

// UnmarshalJSON reads any JSON object.
func (in *GenericMap) UnmarshalJSON(data []byte) error {
	in.Data = map[string]interface{}{}
	return json.Unmarshal(data, &in.Data)
}

// DeepCopyInto copies the map recursively; values are JSON-compatible by construction.
func (in *GenericMap) DeepCopyInto(out *GenericMap) {
	out.Data = runtime.DeepCopyJSON(in.Data)
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
