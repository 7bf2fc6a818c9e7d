// Package manifestdiff compares rendered manifests as people may read them: Secrets' values
// replaced by markers, SOPS ciphertexts said sealed, the rest as a unified diff. `fleet plan`
// and the deployment history's diff (historyapi) show their changes through it.
package manifestdiff

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/pmezard/go-difflib/difflib"
	"sigs.k8s.io/yaml"
)

// Redactor replaces the values of Secrets in manifests by markers: the same value gives the same
// marker within one plan, another value another, so a diff shows that a value changed and never
// what it is. The markers come from a key made for the plan alone (HMAC-SHA256), so they tell
// nothing across plans and cannot be looked up.
type Redactor struct {
	key  []byte
	mu   sync.Mutex
	memo map[string]string
}

// NewRedactor returns a Redactor with a fresh key.
func NewRedactor() *Redactor {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	return &Redactor{key: key, memo: map[string]string{}}
}

// NewRedactorWithKey is a Redactor whose markers are fixed by key (for tests).
func NewRedactorWithKey(key string) *Redactor {
	return &Redactor{key: []byte(key), memo: map[string]string{}}
}

// Apply redacts every Secret of a multi-document manifest (nil: returns it as it is).
func (r *Redactor) Apply(manifest string) string {
	if r == nil || !strings.Contains(manifest, "Secret") {
		return manifest
	}
	r.mu.Lock()
	out, ok := r.memo[manifest]
	r.mu.Unlock()
	if ok {
		return out
	}
	docs := strings.Split(manifest, "\n---")
	for i, doc := range docs {
		docs[i] = r.doc(doc)
	}
	out = strings.Join(docs, "\n---")
	r.mu.Lock()
	r.memo[manifest] = out
	r.mu.Unlock()
	return out
}

// doc redacts one document when it is a Secret; a document that does not parse is dropped
// whole when it mentions a Secret, as it could hold one's data.
func (r *Redactor) doc(doc string) string {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		if strings.Contains(doc, "Secret") {
			return "\n# (a document that does not parse, left out: it may hold a Secret)\n"
		}
		return doc
	}
	if obj["kind"] != "Secret" {
		return doc
	}
	_, sops := obj["sops"]
	if sops {
		// A SOPS file: the manager seals it to each cluster; the plan shows that its values
		// are sealed, and which ciphertexts changed, never decrypting (sealedDiff).
		obj["sops"] = "(SOPS metadata)"
	}
	for _, field := range []string{"data", "stringData"} {
		if m, ok := obj[field].(map[string]any); ok {
			for k, v := range m {
				m[k] = r.marker(fmt.Sprint(v))
				if sops {
					m[k] = "(sealed " + strings.TrimPrefix(m[k].(string), "(redacted ")
				}
			}
		}
	}
	data, err := yaml.Marshal(obj)
	if err != nil {
		return "\n# (a Secret, left out)\n"
	}
	lead := ""
	if strings.HasPrefix(doc, "\n") {
		lead = "\n"
	}
	return lead + string(bytes.TrimRight(data, "\n")) + "\n"
}

func (r *Redactor) marker(value string) string {
	m := hmac.New(sha256.New, r.key)
	m.Write([]byte(value))
	return "(redacted " + hex.EncodeToString(m.Sum(nil))[:8] + ")"
}

// Diff is the unified diff of two manifests, Secrets redacted by r (nil: not), from and to
// naming the sides; "" when they are the same.
func Diff(r *Redactor, a, b, from, to string) string {
	a, b = r.Apply(a), r.Apply(b)
	if a == b {
		return ""
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: from, ToFile: to, Context: 3})
	if err != nil {
		return fmt.Sprintf("(no diff: %v)", err)
	}
	return sealedDiff(d)
}

// sealedValue is a sealed value's line in a diff: its key and marker.
var sealedValue = regexp.MustCompile(`^([-+ ])(\s*[^:\s]+:) \(sealed [0-9a-f]{8}\)$`)

// sealedDiff says of each sealed value in a diff whether it changed: "(sealed, changed)" where
// the ciphertext of its key changed, "(sealed, new)" where it was not there, "(sealed)" on
// the side removed and in the context; the markers, which tell nothing more, go.
func sealedDiff(diff string) string {
	if !strings.Contains(diff, "(sealed ") {
		return diff
	}
	lines := strings.Split(diff, "\n")
	removed := map[string]bool{}
	for _, l := range lines {
		if m := sealedValue.FindStringSubmatch(l); m != nil && m[1] == "-" {
			removed[strings.TrimSpace(m[2])] = true
		}
	}
	for i, l := range lines {
		m := sealedValue.FindStringSubmatch(l)
		switch {
		case m == nil:
		case m[1] != "+":
			lines[i] = m[1] + m[2] + " (sealed)"
		case removed[strings.TrimSpace(m[2])]:
			lines[i] = m[1] + m[2] + " (sealed, changed)"
		default:
			lines[i] = m[1] + m[2] + " (sealed, new)"
		}
	}
	return strings.Join(lines, "\n")
}
