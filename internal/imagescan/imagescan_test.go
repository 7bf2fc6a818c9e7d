package imagescan

import (
	"strings"
	"testing"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestLatest(t *testing.T) {
	tags := []string{"1.0.0", "1.2.0", "1.10.1", "2.0.0", "latest", "2.1.0-rc.1", "v1.11.0"}
	for _, tc := range []struct {
		name   string
		policy fleet.ImageScanPolicy
		want   string
		err    string
	}{
		{"semver range", fleet.ImageScanPolicy{SemVer: &fleet.SemVerPolicy{Range: ">=1.0.0 <2.0.0"}}, "v1.11.0", ""},
		{"no policy: any release", fleet.ImageScanPolicy{}, "2.0.0", ""},
		{"nothing in range", fleet.ImageScanPolicy{SemVer: &fleet.SemVerPolicy{Range: ">=5"}}, "", "no tag of 7 matches"},
		{"broken range", fleet.ImageScanPolicy{SemVer: &fleet.SemVerPolicy{Range: "one"}}, "", "spec.policy.semver.range"},
		{"alphabetical", fleet.ImageScanPolicy{Alphabetical: &fleet.AlphabeticalPolicy{}}, "v1.11.0", ""},
		{"alphabetical desc", fleet.ImageScanPolicy{Alphabetical: &fleet.AlphabeticalPolicy{Order: "desc"}}, "1.0.0", ""},
		{"alphabetical bad order", fleet.ImageScanPolicy{Alphabetical: &fleet.AlphabeticalPolicy{Order: "up"}}, "", "order"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Latest(tags, tc.policy)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Latest = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestRewrite(t *testing.T) {
	in := `spec:
  containers:
  - image: registry.example.com/web:1.0.0 # {"$imagescan": "web"}
    name: web
  - image: "registry.example.com/other:3.0" # {"$imagescan": "other"}
helm:
  values:
    tag: 1.0.0 # {"$imagescan": "web:tag"}
    repository: old/name # {"$imagescan": "web:name"}
    untouched: 1.0.0
`
	out, changed := Rewrite([]byte(in), "web", "registry.example.com/web", "1.2.0")
	if !changed {
		t.Fatal("nothing changed")
	}
	want := `spec:
  containers:
  - image: registry.example.com/web:1.2.0 # {"$imagescan": "web"}
    name: web
  - image: "registry.example.com/other:3.0" # {"$imagescan": "other"}
helm:
  values:
    tag: 1.2.0 # {"$imagescan": "web:tag"}
    repository: registry.example.com/web # {"$imagescan": "web:name"}
    untouched: 1.0.0
`
	if string(out) != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	if _, changed := Rewrite(out, "web", "registry.example.com/web", "1.2.0"); changed {
		t.Fatal("a second rewrite changed something")
	}
}
