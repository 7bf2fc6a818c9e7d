package render

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// captureStderr runs f with the process's stderr going to a pipe and returns what was written.
func captureStderr(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	real := os.Stderr
	os.Stderr = w
	out := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		out <- string(b)
	}()
	f()
	os.Stderr = real
	_ = w.Close()
	return <-out
}

// Kustomize prints a deprecation warning on every load of a kustomization; rendering a bundle for
// many clusters gives each warning once for the bundle, and nothing of kustomize's own printing.
func TestKustomizeDeprecationsAreGivenOncePerBundle(t *testing.T) {
	files := Files{
		"kustomization.yaml":      []byte("bases:\n- base\ncommonLabels:\n  team: a\n"),
		"base/kustomization.yaml": []byte("resources:\n- cm.yaml\n"),
		"base/cm.yaml":            []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"),
	}
	var got []string
	saved := WarnDeprecated
	WarnDeprecated = func(bundle, file, msg string) { got = append(got, bundle+" "+file+" "+msg) }
	t.Cleanup(func() { WarnDeprecated = saved })
	stderr := captureStderr(t, func() {
		for _, bundle := range []string{"one", "one", "one", "two"} {
			out, err := (&Kustomizer{Files: files, Bundle: bundle}).Build(nil)
			if err != nil || !strings.Contains(string(out), "team: a") {
				t.Errorf("bundle %s: %v\n%s", bundle, err, out)
			}
		}
	})
	if strings.Contains(stderr, "Warning") {
		t.Errorf("kustomize's own warnings reached stderr:\n%s", stderr)
	}
	if len(got) != 4 {
		t.Fatalf("want 2 warnings for each of 2 bundles, got %d:\n%s", len(got), strings.Join(got, "\n"))
	}
	for _, bundle := range []string{"one", "two"} {
		for _, field := range []string{"'bases'", "'commonLabels'"} {
			n := 0
			for _, g := range got {
				if strings.HasPrefix(g, bundle+" kustomization.yaml ") && strings.Contains(g, field) {
					n++
				}
			}
			if n != 1 {
				t.Errorf("bundle %s, %s: warned %d times, want once", bundle, field, n)
			}
		}
	}
}

// While kustomize's warnings are taken out of stderr, what anything else writes there passes.
func TestOtherStderrPassesThrough(t *testing.T) {
	stderr := captureStderr(t, func() {
		_ = withStderr(func(w io.Writer, line string) {
			if line != "# Warning: known" {
				fmt.Fprintln(w, line)
			}
		}, func() error {
			fmt.Fprintln(os.Stderr, "# Warning: known")
			fmt.Fprintln(os.Stderr, "another writer's line")
			return nil
		})
	})
	if stderr != "another writer's line\n" {
		t.Errorf("stderr: %q", stderr)
	}
}
