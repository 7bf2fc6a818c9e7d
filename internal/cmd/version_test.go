package cmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fleetgo/fleet/internal/version"
)

func TestVersionPrintsBuildInfo(t *testing.T) {
	version.Version, version.GitCommit, version.BuildDate = "v9.8.7", "abc123", "2026-01-02T03:04:05Z"
	var out bytes.Buffer
	root := New()
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"v9.8.7", "abc123", "2026-01-02T03:04:05Z"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output %q lacks %q", out.String(), want)
		}
	}
}
