package deployer

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/lru"

	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/render"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// contentCacheSize bounds how many decoded Contents the agent keeps. Contents are immutable
// (named by their hash), so a cached one never goes stale.
const contentCacheSize = 32

// contentCache fetches Contents by name (the agent may only get them, never list or watch)
// and keeps the most recently used few decoded.
type contentCache struct {
	client fleetcontrollers.ContentClient
	files  *lru.Cache
}

func newContentCache(c fleetcontrollers.ContentClient) *contentCache {
	return &contentCache{client: c, files: lru.New(contentCacheSize)}
}

// Files returns the bundle files stored in the named Content.
func (c *contentCache) Files(name string) (render.Files, error) {
	if f, ok := c.files.Get(name); ok {
		return f.(render.Files), nil
	}
	content, err := c.client.Get(name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("fetching content %s: %w", name, err)
	}
	f, err := decodeContent(content)
	if err != nil {
		return nil, err
	}
	c.files.Add(name, f)
	return f, nil
}

// FilesFrom returns the bundle files of contents name that fetch returns (gzipped, as a
// Content holds them), checked against name (the hash of the manifest).
func (c *contentCache) FilesFrom(name string, fetch func() ([]byte, error)) (render.Files, error) {
	if f, ok := c.files.Get(name); ok {
		return f.(render.Files), nil
	}
	gz, err := fetch()
	if err != nil {
		return nil, err
	}
	data, err := bundlereader.Gunzip(gz, "contents "+name)
	if err != nil {
		return nil, err
	}
	if got := target.ContentName(data); got != name {
		return nil, fmt.Errorf("contents %s: the registry holds %s", name, got)
	}
	f, err := decodeManifest(data, "contents "+name)
	if err != nil {
		return nil, err
	}
	c.files.Add(name, f)
	return f, nil
}

// decodeContent reads a Content: gzip of {"resources": [...]}.
func decodeContent(content *fleet.Content) (render.Files, error) {
	res, err := bundlereader.ContentResources(content)
	if err != nil {
		return nil, err
	}
	return render.FromResources(res)
}

// decodeManifest reads a manifest, {"resources": [...]}; what names it in errors.
func decodeManifest(data []byte, what string) (render.Files, error) {
	res, err := bundlereader.ManifestResources(data, what)
	if err != nil {
		return nil, err
	}
	return render.FromResources(res)
}
