package bundle

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/sealing"
	"github.com/fleetgo/fleet/internal/sopsfile"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// SOPSNamespacesAnnotation, on a Secret of the manager's namespace, lists the namespaces (comma
// separated, or "*") whose bundles' SOPS files its keys decrypt: data keys ending ".agekey" hold
// age identities (one per line), those ending ".asc" armored OpenPGP private keys. A tenant, who
// cannot read the manager's namespace, never sees them.
const SOPSNamespacesAnnotation = "fleet.cattle.io/sops-namespaces"

// bundleSecrets are a Bundle's SOPS files for one pass: their ciphertexts by name, and, once a
// deployment needs one sealed, the files decrypted (kept for the pass only, never written).
type bundleSecrets struct {
	cipher map[string][]byte
	plain  map[string][]byte
}

// secretsOf reads b's SOPS files and decrypts them with the keys its namespace was given, and
// checks that every cluster it targets has a sealing key: a file that does not decrypt, or a
// cluster without a key, fails the whole Bundle before anything is written (nil: it has none).
func (h *handler) secretsOf(b *fleet.Bundle, plan []planned, contentName string) (*bundleSecrets, error) {
	if h.mem.noSecretsIn(b, contentName) {
		return nil, nil // these contents were read before
	}
	cipher, err := sopsFiles(b.Spec.Resources)
	if err != nil {
		return nil, err
	}
	h.mem.secretsRead(b, contentName, len(cipher) == 0)
	if len(cipher) == 0 {
		return nil, nil
	}
	if b.Spec.ContentsID != "" {
		return nil, fmt.Errorf("secrets: SOPS files are not sealed for bundles whose contents a registry keeps")
	}
	var keyless []string
	for _, p := range plan {
		if p.namespace != "" && p.cluster.Status.Agent.SealingKey == "" {
			keyless = append(keyless, p.cluster.Name)
		}
	}
	if len(keyless) > 0 {
		sort.Strings(keyless)
		return nil, fmt.Errorf("secrets: clusters without a sealing key (their agents report one when they check in): %s",
			strings.Join(keyless[:min(len(keyless), 5)], ", "))
	}
	return h.decrypt(b.Namespace, cipher, plan)
}

// secretsAt are the SOPS files of Content content, which a revision the Bundle of namespace ns
// returns to deploys (a user's rollback, a rollout's): a cluster sent back to it gets its
// values, sealed to it, not the Bundle's current ones (nil: it has none).
func (h *handler) secretsAt(ns, content string) (*bundleSecrets, error) {
	c, err := h.contents.Get(content, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	res, err := bundlereader.ContentResources(c)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	cipher, err := sopsFiles(res)
	if err != nil || len(cipher) == 0 {
		return nil, err
	}
	return h.decrypt(ns, cipher, nil)
}

// sopsFiles are the SOPS files among resources: their ciphertexts by name.
func sopsFiles(resources []fleet.BundleResource) (map[string][]byte, error) {
	cipher := map[string][]byte{}
	for _, r := range resources {
		if !strings.Contains(r.Content, "sops") && r.Encoding == "" {
			continue // plain text without SOPS metadata
		}
		data, err := bundlereader.Decode(r)
		if err != nil {
			return nil, err
		}
		if sopsfile.Is(r.Name, data) {
			cipher[path.Clean(r.Name)] = data
		}
	}
	return cipher, nil
}

// decrypt decrypts the SOPS files with the keys namespace ns was given, and checks that each
// templated one renders for every cluster of plan.
func (h *handler) decrypt(ns string, cipher map[string][]byte, plan []planned) (*bundleSecrets, error) {
	keys, err := h.sopsKeys(ns)
	if err != nil {
		return nil, err
	}
	s := &bundleSecrets{cipher: cipher, plain: map[string][]byte{}}
	for name, data := range cipher {
		plain, err := sopsfile.Decrypt(name, data, keys)
		if err != nil {
			return nil, fmt.Errorf("secrets: %w", err)
		}
		s.plain[name] = plain
		if err := renders(name, plain, plan); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// renders checks that a templated file renders for every targeted cluster, before any is
// written.
func renders(name string, plain []byte, plan []planned) error {
	if !target.TemplatedFile(plain) {
		return nil
	}
	for _, p := range plan {
		if p.namespace == "" {
			continue
		}
		if _, err := target.RenderFile(name, plain, p.cluster); err != nil {
			return fmt.Errorf("secrets: cluster %s: %w", p.cluster.Name, err)
		}
	}
	return nil
}

// sopsKeys are the keys the manager's namespace holds for namespace ns.
func (h *handler) sopsKeys(ns string) (sopsfile.Keys, error) {
	var keys sopsfile.Keys
	secrets, err := h.secrets.List(h.systemNamespace, labels.Everything())
	if err != nil {
		return keys, err
	}
	for _, s := range secrets {
		allowed := strings.Split(s.Annotations[SOPSNamespacesAnnotation], ",")
		if !slices.ContainsFunc(allowed, func(a string) bool { a = strings.TrimSpace(a); return a == ns || a == "*" }) {
			continue
		}
		for k, v := range s.Data {
			switch {
			case strings.HasSuffix(k, ".agekey"):
				for _, line := range strings.Split(string(v), "\n") {
					if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
						keys.Age = append(keys.Age, line)
					}
				}
			case strings.HasSuffix(k, ".asc"):
				keys.PGP = append(keys.PGP, v)
			}
		}
	}
	if len(keys.Age) == 0 && len(keys.PGP) == 0 {
		return keys, fmt.Errorf("secrets: no SOPS key for namespace %s: an admin gives one in a Secret of %s annotated %s", ns, h.systemNamespace, SOPSNamespacesAnnotation)
	}
	return keys, nil
}

// seal gives next, the deployment of cluster c, the Bundle's files sealed to c's key: those
// whose source (ciphertext, key, binding) is unchanged from cur's are kept as they are.
func (s *bundleSecrets) seal(c *fleet.Cluster, next, cur *fleet.BundleDeployment) error {
	next.Spec.SealedFiles = nil
	if s == nil {
		return nil
	}
	key := c.Status.Agent.SealingKey
	names := make([]string, 0, len(s.cipher))
	for name := range s.cipher {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		bind := sealing.Binding(next.Namespace, next.Name, name)
		plain := s.plain[name]
		f := fleet.SealedFile{Name: name}
		if target.TemplatedFile(plain) {
			f.Context = target.ContextHash(c)
		}
		f.Source = sealing.Source(s.cipher[name], key, bind+f.Context)
		if old := sealedFile(cur, name); old != nil && old.Source == f.Source {
			f.Sealed = old.Sealed
		} else {
			if f.Context != "" {
				var err error
				if plain, err = target.RenderFile(name, plain, c); err != nil {
					return fmt.Errorf("secrets: cluster %s: %w", c.Name, err)
				}
			}
			sealed, err := sealing.Seal(key, bind, map[string][]byte{"file": plain})
			if err != nil {
				return fmt.Errorf("secrets: sealing %s to cluster %s: %w", name, c.Name, err)
			}
			f.Sealed = sealed
		}
		next.Spec.SealedFiles = append(next.Spec.SealedFiles, f)
	}
	return nil
}

func sealedFile(bd *fleet.BundleDeployment, name string) *fleet.SealedFile {
	if bd == nil {
		return nil
	}
	for i := range bd.Spec.SealedFiles {
		if bd.Spec.SealedFiles[i].Name == name {
			return &bd.Spec.SealedFiles[i]
		}
	}
	return nil
}
