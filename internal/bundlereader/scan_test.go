package bundlereader

import (
	"reflect"
	"testing"
)

const fixtureRepo = "testdata/repo"

func TestDiscover(t *testing.T) {
	tests := []struct {
		name  string
		paths []string
		want  []BundleDir
	}{
		{"whole repository", nil, []BundleDir{
			{Path: ".", FleetYAML: ""},
			{Path: "app", FleetYAML: "app/fleet.yaml"},
			{Path: "charty", FleetYAML: "charty/fleet.yaml"},
			{Path: "nested", FleetYAML: "nested/fleet.yaml"},
			{Path: "nested/child", FleetYAML: "nested/child/fleet.yml"},
		}},
		{"a folder of loose manifests", []string{"loose"}, []BundleDir{{Path: "loose"}}},
		{"a glob", []string{"/nest*"}, []BundleDir{
			{Path: "nested", FleetYAML: "nested/fleet.yaml"},
			{Path: "nested/child", FleetYAML: "nested/child/fleet.yml"},
		}},
		{"overlapping paths count once", []string{"app", "app/"}, []BundleDir{{Path: "app", FleetYAML: "app/fleet.yaml"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Discover(fixtureRepo, tt.paths)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestDiscoverMissingPath(t *testing.T) {
	_, err := Discover(fixtureRepo, []string{"does-not-exist"})
	if err == nil || err.Error() != `path "does-not-exist": no such folder in the repository` {
		t.Fatalf("err = %v", err)
	}
}

func TestReadFiles(t *testing.T) {
	all, err := Discover(fixtureRepo, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir  BundleDir
		want []string
	}{
		// The root takes loose folders but neither nested bundles nor ignored or hidden files.
		{all[0], []string{"loose/pod.json", "loose/pod.yaml", "root.yaml"}},
		{all[1], []string{"cm.yaml", "overlays/prod/svc_patch.yaml"}},
		{all[2], []string{"Chart.yaml", "templates/x.yaml"}},
		// .fleetignore globs, hidden files and the nested child bundle stay out.
		{all[3], []string{"a.yaml"}},
		{all[4], []string{"b.yaml"}},
	}
	for _, tt := range tests {
		t.Run(tt.dir.Path, func(t *testing.T) {
			files, err := ReadFiles(fixtureRepo, tt.dir, all)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, f := range files {
				names = append(names, f.Name)
			}
			if !reflect.DeepEqual(names, tt.want) {
				t.Fatalf("got %v, want %v", names, tt.want)
			}
		})
	}
}
