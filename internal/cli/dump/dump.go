// Package dump writes `fleet dump`'s archive: every object of Fleet's API on the manager (all
// kinds of fleet.cattle.io, every namespace), as YAML files in a gzipped tar, for a support case
// or a look offline. No Secret is read or written: Fleet's kinds name Secrets, they do not hold
// them. (CLI)
package dump

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Options of a dump.
type Options struct {
	// Config reaches the manager.
	Config *rest.Config
	// Namespace, when set, limits the dump to that namespace's objects (and the cluster-scoped
	// ones: Contents).
	Namespace string
	// Now stamps the archive's files (time.Now when nil).
	Now func() time.Time
}

// Run writes the archive to out and returns how many objects it holds. Each object is
// <resource>/<namespace>/<name>.yaml (<resource>/<name>.yaml when cluster-scoped), with its
// managedFields left out.
func Run(ctx context.Context, o Options, out io.Writer) (int, error) {
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	dc, err := discovery.NewDiscoveryClientForConfig(o.Config)
	if err != nil {
		return 0, err
	}
	dyn, err := dynamic.NewForConfig(o.Config)
	if err != nil {
		return 0, err
	}
	gv := fleet.SchemeGroupVersion
	list, err := dc.ServerResourcesForGroupVersion(gv.String())
	if err != nil {
		return 0, fmt.Errorf("listing the kinds of %s (are Fleet's CRDs installed?): %w", gv, err)
	}
	zw := gzip.NewWriter(out)
	tw := tar.NewWriter(zw)
	count := 0
	resources := list.APIResources
	sort.Slice(resources, func(i, j int) bool { return resources[i].Name < resources[j].Name })
	for _, r := range resources {
		if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
			continue // subresources
		}
		client := dyn.Resource(schema.GroupVersionResource{Group: gv.Group, Version: gv.Version, Resource: r.Name})
		var ri dynamic.ResourceInterface = client
		if r.Namespaced && o.Namespace != "" {
			ri = client.Namespace(o.Namespace)
		}
		items, err := ri.List(ctx, metav1.ListOptions{})
		if err != nil {
			return count, fmt.Errorf("listing %s: %w", r.Name, err)
		}
		n, err := writeItems(tw, r, items.Items, now())
		count += n
		if err != nil {
			return count, err
		}
	}
	if err := tw.Close(); err != nil {
		return count, err
	}
	return count, zw.Close()
}

// writeItems writes each object of one resource into the archive, without its managedFields.
func writeItems(tw *tar.Writer, r metav1.APIResource, items []unstructured.Unstructured, modTime time.Time) (int, error) {
	for i := range items {
		obj := &items[i]
		obj.SetManagedFields(nil)
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return i, err
		}
		name := path.Join(r.Name, obj.GetName()+".yaml")
		if r.Namespaced {
			name = path.Join(r.Name, obj.GetNamespace(), obj.GetName()+".yaml")
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), ModTime: modTime}); err != nil {
			return i, err
		}
		if _, err := tw.Write(data); err != nil {
			return i, err
		}
	}
	return len(items), nil
}
