package bundlereader

import (
	"errors"
	"testing"
)

type strictSample struct {
	Name string `json:"name"`
	Helm *struct {
		Chart          string `json:"chart"`
		TimeoutSeconds int    `json:"timeoutSeconds"`
	} `json:"helm"`
	Targets []struct {
		Name string `json:"name"`
	} `json:"targets"`
}

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name, data string
		want       *InputError
	}{
		{"valid", "name: a\nhelm:\n  chart: ./c\n", nil},
		{"empty", "", nil},
		{"unknown top-level key", "name: a\nhelmm:\n  chart: x\n", &InputError{File: "f.yaml", Line: 2, Key: "helmm", Msg: "unknown key (did you mean helm?)"}},
		{"unknown nested key", "name: a\ntargets:\n- name: x\n  clusterSelectr: {}\n", &InputError{File: "f.yaml", Line: 4, Key: "clusterSelectr", Msg: "unknown key"}},
		{"wrong type", "helm:\n  chart: c\n  timeoutSeconds: soon\n", &InputError{File: "f.yaml", Line: 3, Key: "helm.timeoutSeconds", Msg: "invalid value: string where int is expected"}},
		{"malformed", "name: a\n  b: c\n", &InputError{File: "f.yaml", Line: 2, Msg: "malformed YAML: mapping values are not allowed in this context"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strictSample
			err := decodeStrict("f.yaml", []byte(tt.data), &out)
			if tt.want == nil {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			var ie *InputError
			if !errors.As(err, &ie) {
				t.Fatalf("want InputError, got %v", err)
			}
			if *ie != *tt.want {
				t.Fatalf("got  %#v\nwant %#v", *ie, *tt.want)
			}
		})
	}
}
