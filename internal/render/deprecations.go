package render

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path"
	"strings"
	"sync"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// WarnDeprecated reports that a bundle's kustomization uses a field kustomize deprecates (msg is
// kustomize's own text). Build calls it once per bundle, file and message in a process, however
// often the bundle is rendered (for each cluster, each drift check): kustomize itself prints the
// warning to os.Stderr on every load of the kustomization.
var WarnDeprecated = func(bundle, file, msg string) {
	fmt.Fprintf(os.Stderr, "bundle %s: kustomize %s: %s\n", bundle, file, strings.TrimSpace(strings.TrimPrefix(msg, "#")))
}

// maxWarned bounds the warnings remembered as given; past it the memory starts again (a bundle
// may then be warned about once more).
const maxWarned = 10000

var (
	warnedMu sync.Mutex
	warned   = map[string]bool{}
)

// warnOnce calls WarnDeprecated for each deprecation of each kustomization not yet reported for
// this bundle.
func warnOnce(bundle string, found map[string][]string) {
	warnedMu.Lock()
	defer warnedMu.Unlock()
	for file, msgs := range found {
		for _, m := range msgs {
			key := bundle + "\x00" + file + "\x00" + m
			if warned[key] {
				continue
			}
			if len(warned) >= maxWarned {
				clear(warned)
			}
			warned[key] = true
			WarnDeprecated(bundle, file, m)
		}
	}
}

// deprecations lists, per kustomization file under root (relative to it), the warnings
// kustomize prints for its deprecated fields: kustomize's own check, so the same texts.
func deprecations(fs filesys.FileSystem, root string) map[string][]string {
	found := map[string][]string{}
	_ = fs.Walk(root, func(p string, info iofs.FileInfo, err error) error {
		if err != nil || info.IsDir() || !isKustomization(path.Base(p)) {
			return nil
		}
		raw, err := fs.ReadFile(p)
		if err != nil {
			return nil
		}
		var k types.Kustomization
		if k.Unmarshal(raw) != nil {
			return nil
		}
		if msgs := k.CheckDeprecatedFields(); msgs != nil && len(*msgs) > 0 {
			found[strings.TrimPrefix(p, root+"/")] = *msgs
		}
		return nil
	})
	return found
}

// krustyRuns serializes kustomize runs that have deprecation warnings to take out of its output:
// os.Stderr is the process's, so only one run at a time may have it redirected.
var krustyRuns sync.Mutex

// runKustomize runs kustomize on dir. When its kustomizations use deprecated fields, kustomize's
// own printing of them is taken out of the process's stderr (anything else written there
// meanwhile passes through) and each is reported once for the bundle instead.
func runKustomize(fs filesys.FileSystem, root, dir, bundle string) (resmap.ResMap, error) {
	found := deprecations(fs, root)
	if len(found) == 0 {
		return krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
	}
	known := map[string]bool{}
	for _, msgs := range found {
		for _, m := range msgs {
			known[m] = true
		}
	}
	krustyRuns.Lock()
	defer krustyRuns.Unlock()
	var resMap resmap.ResMap
	err := withStderr(func(w io.Writer, line string) {
		if !known[line] {
			fmt.Fprintln(w, line)
		}
	}, func() error {
		var err error
		resMap, err = krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, dir)
		return err
	})
	warnOnce(bundle, found)
	return resMap, err
}

// withStderr runs f with os.Stderr a pipe whose lines go to line, with the real stderr to pass
// them on to. Without a pipe (out of descriptors) f runs with stderr as it is.
func withStderr(line func(stderr io.Writer, line string), f func() error) error {
	r, w, err := os.Pipe()
	if err != nil {
		return f()
	}
	real := os.Stderr
	done := make(chan struct{})
	go func() {
		defer close(done)
		s := bufio.NewScanner(r)
		s.Buffer(nil, 1<<20)
		for s.Scan() {
			line(real, string(bytes.TrimRight(s.Bytes(), "\r")))
		}
		_, _ = io.Copy(real, r) // a line too long to scan: passed on as it is
	}()
	os.Stderr = w
	err = f()
	os.Stderr = real
	_ = w.Close()
	<-done
	_ = r.Close()
	return err
}
