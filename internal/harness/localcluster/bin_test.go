package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFreePortsAreDistinctAcrossCalls(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		ports, err := freePorts(3)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
		}
	}
}

func TestCheckBinariesNamesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"etcd", "kube-apiserver"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		tier    Tier
		missing []string
	}{
		{APIServer, nil},
		{Controllers, []string{"kube-controller-manager"}},
		{Workloads, []string{"kube-controller-manager", "kube-scheduler", "kwok", kwokStagesFile}},
	}
	for _, tt := range tests {
		t.Run(tt.tier.String(), func(t *testing.T) {
			err := checkBinaries(dir, tt.tier)
			if len(tt.missing) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("expected an error")
			}
			for _, m := range tt.missing {
				if !strings.Contains(err.Error(), filepath.Join(dir, m)+" not found") {
					t.Errorf("error %q does not name %s", err, m)
				}
			}
		})
	}
}

func TestTailFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 100 {
		b.WriteString("line ")
		b.WriteString(strings.Repeat("x", i%3))
		b.WriteString("\n")
	}
	b.WriteString("last line\n")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got := strings.Split(tailFile(p, 3), "\n")
	if len(got) != 3 || got[2] != "last line" {
		t.Fatalf("tail = %q", got)
	}
	if !strings.Contains(tailFile(filepath.Join(t.TempDir(), "nope"), 3), "cannot read") {
		t.Error("a missing log must be reported as unreadable")
	}
}

func TestPanicLineLeadsACrashReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kwok.log")
	log := "starting\npanic: runtime error: invalid memory address\n\ngoroutine 1 [running]:\n"
	for i := 0; i < 40; i++ {
		log += "frame\n"
	}
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := panicLine(path); got != "panic: runtime error: invalid memory address\n...\n" {
		t.Fatalf("panicLine = %q", got)
	}
	if err := os.WriteFile(path, []byte("x\nfatal error: concurrent map writes\n\ngoroutine 7\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := panicLine(path); got != "fatal error: concurrent map writes\n...\n" {
		t.Fatalf("panicLine = %q", got)
	}
	if err := os.WriteFile(path, []byte("fine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := panicLine(path); got != "" {
		t.Fatalf("no panic, no line: %q", got)
	}
}
