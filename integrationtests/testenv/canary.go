package testenv

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/fleetgo/fleet/internal/harness/localcluster"
)

// Served finds canary in any object c's apiserver serves of the kinds that could carry a
// bundle's contents or its secrets (the fleet kinds, Contents unzipped, Secrets, ConfigMaps,
// Events) and in any file of its etcd's data (every key, raw, with its history): where it shows,
// or "".
func Served(ctx context.Context, c *localcluster.Cluster, canary []byte) (string, error) {
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return "", err
	}
	fleetKind := func(r string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "fleet.cattle.io", Version: "v1alpha1", Resource: r}
	}
	for _, gvr := range []schema.GroupVersionResource{fleetKind("bundles"), fleetKind("bundledeployments"), fleetKind("contents"),
		fleetKind("clusters"), fleetKind("gitrepos"), {Version: "v1", Resource: "secrets"}, {Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "events"}} {
		list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return "", err
		}
		for _, o := range list.Items {
			data, err := json.Marshal(o.Object)
			if err != nil {
				return "", err
			}
			if gvr.Resource == "contents" {
				raw, _ := o.Object["content"].(string)
				data = append(data, gunzipped(raw)...)
			}
			if bytes.Contains(data, canary) {
				return gvr.Resource + " " + o.GetNamespace() + "/" + o.GetName(), nil
			}
		}
	}
	return InEtcd(c, canary)
}

// InEtcd is the first file of c's etcd data holding b ("": none).
func InEtcd(c *localcluster.Cluster, b []byte) (string, error) {
	found := ""
	err := filepath.WalkDir(filepath.Join(c.Dir, "etcd"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || found != "" {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil && bytes.Contains(data, b) {
			found = "etcd file " + p
		}
		return err
	})
	return found, err
}

// gunzipped is a Content's content field (base64 of gzip) unpacked, or nil.
func gunzipped(b64 string) []byte {
	var raw []byte
	if err := json.Unmarshal([]byte(`"`+b64+`"`), &raw); err != nil {
		return nil
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil
	}
	out, _ := io.ReadAll(zr)
	return out
}
