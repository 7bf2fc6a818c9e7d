// Command controlplane builds the Kubernetes control-plane binaries the project's tests and
// quickstart run (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok, and
// the kubelet and kube-proxy of the real-node tier)
// from their Go modules, pinned by this module's go.mod, into a bin folder.
//
// It is idempotent: a binary whose stamp (Go version, go.mod, go.sum and this builder's own
// sources) is unchanged is not rebuilt. While it builds it prints progress, because a cold build
// of kube-apiserver takes several minutes on a small machine.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

// binary is one command this builder produces.
type binary struct {
	name string // file name in the bin folder
	pkg  string // Go package to build
}

var binaries = []binary{
	{"etcd", "./etcd"},
	{"kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"},
	{"kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"},
	{"kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"},
	{"kubectl", "k8s.io/kubernetes/cmd/kubectl"},
	{"kubelet", "k8s.io/kubernetes/cmd/kubelet"},
	{"kube-proxy", "k8s.io/kubernetes/cmd/kube-proxy"},
	{"kwok", "sigs.k8s.io/kwok/cmd/kwok"},
}

// progressEvery is how often a running build reports that it is still working.
const progressEvery = 20 * time.Second

func main() {
	out := flag.String("out", "../bin", "folder the binaries are written to")
	force := flag.Bool("force", false, "rebuild even when the stamps are current")
	flag.Parse()
	if err := run(*out, *force); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(1)
	}
}

func run(out string, force bool) error {
	out, err := filepath.Abs(out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	stamp, err := stampKey()
	if err != nil {
		return fmt.Errorf("computing build stamp: %w", err)
	}

	if err := writeKwokStages(out); err != nil {
		return err
	}

	var stale []binary
	for _, b := range binaries {
		if force || !current(out, b, stamp) {
			stale = append(stale, b)
		}
	}
	if len(stale) == 0 {
		fmt.Printf("control plane up to date in %s\n", out)
		return nil
	}

	kubeVersion, err := moduleVersion("k8s.io/kubernetes")
	if err != nil {
		return err
	}
	kwokVersion, err := moduleVersion("sigs.k8s.io/kwok")
	if err != nil {
		return err
	}

	names := make([]string, 0, len(stale))
	pkgs := make([]string, 0, len(stale))
	for _, b := range stale {
		names = append(names, b.name)
		pkgs = append(pkgs, b.pkg)
	}
	fmt.Printf("building %s (Kubernetes %s, kwok %s) into %s\n", strings.Join(names, ", "), kubeVersion, kwokVersion, out)
	fmt.Println("a cold build takes 10-20 minutes on 2 cores; later runs reuse the Go build cache")

	start := time.Now()
	args := append([]string{"build", "-v", "-o", out + string(os.PathSeparator),
		"-ldflags", ldflags(kubeVersion, kwokVersion)}, pkgs...)
	if err := goCommand(args, start); err != nil {
		return err
	}
	for _, b := range stale {
		if err := os.WriteFile(stampPath(out, b), []byte(stamp+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("built %s in %s\n", strings.Join(names, ", "), time.Since(start).Round(time.Second))
	return nil
}

// goCommand runs the go tool, counting the packages `go build -v` reports so a long build
// shows that it moves.
func goCommand(args []string, start time.Time) error {
	cmd := exec.Command("go", args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	cmd.Stdout = os.Stdout
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting go build: %w", err)
	}

	var compiled atomic.Int64
	var errText bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			// `go build -v` prints bare import paths; anything else is a diagnostic.
			if strings.ContainsAny(line, " :\t") {
				errText.WriteString(line + "\n")
				continue
			}
			compiled.Add(1)
		}
	}()
	ticker := time.NewTicker(progressEvery)
	defer ticker.Stop()
	waitErr := make(chan error, 1)
	go func() { <-done; waitErr <- cmd.Wait() }()
	for {
		select {
		case <-ticker.C:
			fmt.Printf("  ... %d packages compiled, %s elapsed\n", compiled.Load(), time.Since(start).Round(time.Second))
		case err := <-waitErr:
			if err != nil {
				return fmt.Errorf("go build failed: %w\n%s", err, errText.String())
			}
			return nil
		}
	}
}

// ldflags sets the version variables so `kube-apiserver --version` and `kwok --version` print
// the versions really built.
func ldflags(kube, kwok string) string {
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(kube, "v"), ".", 3); len(parts) >= 2 {
		major, minor = parts[0], parts[1]
	}
	date := time.Now().UTC().Format(time.RFC3339)
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+kube,
			"-X", pkg+".gitMajor="+major,
			"-X", pkg+".gitMinor="+minor,
			"-X", pkg+".gitTreeState=clean",
			"-X", pkg+".buildDate="+date,
		)
	}
	flags = append(flags, "-X", "sigs.k8s.io/kwok/pkg/consts.Version="+strings.TrimPrefix(kwok, "v"))
	return "-s -w " + strings.Join(flags, " ")
}

func moduleVersion(path string) (string, error) {
	out, err := exec.Command("go", "list", "-m", "-json", path).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", path, err)
	}
	var m struct{ Version string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", err
	}
	if m.Version == "" {
		return "", fmt.Errorf("no version for module %s", path)
	}
	return m.Version, nil
}

// stampKey hashes everything that decides what the binaries contain.
func stampKey() (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, f := range []string{"go.mod", "go.sum", "main.go", filepath.Join("etcd", "main.go")} {
		fh, err := os.Open(f)
		if err != nil {
			return "", err
		}
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func stampPath(out string, b binary) string { return filepath.Join(out, "."+b.name+".stamp") }

func current(out string, b binary, stamp string) bool {
	if _, err := os.Stat(filepath.Join(out, b.name)); err != nil {
		return false
	}
	got, err := os.ReadFile(stampPath(out, b))
	if errors.Is(err, os.ErrNotExist) || err != nil {
		return false
	}
	return strings.TrimSpace(string(got)) == stamp
}

// kwokStagesFile is the kwok configuration written beside the binaries: kwok's own default
// stages, which make fake Nodes Ready and Pods Running and Ready.
const kwokStagesFile = "kwok-stages.yaml"

func writeKwokStages(out string) error {
	docs := []string{nodefast.DefaultNodeInit, nodeheartbeat.DefaultNodeHeartbeat,
		podfast.DefaultPodReady, podfast.DefaultPodComplete, podfast.DefaultPodDelete}
	var b strings.Builder
	for _, d := range docs {
		b.WriteString("---\n")
		b.WriteString(strings.TrimSpace(d))
		b.WriteString("\n")
	}
	return os.WriteFile(filepath.Join(out, kwokStagesFile), []byte(b.String()), 0o644)
}
