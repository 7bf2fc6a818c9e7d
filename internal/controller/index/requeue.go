package index

import (
	"reflect"
	"strings"
	"time"

	"github.com/rancher/wrangler/v3/pkg/relatedresource"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
)

// RequeueNamespace is an OnChange handler for objects that govern a namespace (restrictions,
// Policies): a change of one brings back every object list finds in its namespace.
func RequeueNamespace[T any, O metav1.Object](list func(ns string, sel labels.Selector) ([]O, error), enqueue func(ns, name string)) func(string, T) (T, error) {
	return func(key string, obj T) (T, error) {
		ns, _, _ := strings.Cut(key, "/")
		items, err := list(ns, labels.Everything())
		for _, o := range items {
			enqueue(o.GetNamespace(), o.GetName())
		}
		return obj, err
	}
}

// Parent resolves a child object to its parent, named by the child's labels: nameLabel holds the
// parent's name, nsLabel its namespace (empty: the child's own). It is the resolver of the
// manager's child -> parent watches (relatedresource.Watch): a BundleDeployment to its Bundle,
// GitRepo or HelmOp, a Bundle or a Job to its GitRepo or HelmOp.
func Parent(nsLabel, nameLabel string) relatedresource.Resolver {
	return func(ns, _ string, obj runtime.Object) ([]relatedresource.Key, error) {
		if obj == nil || reflect.ValueOf(obj).IsNil() {
			return nil, nil // (deleted: relatedresource resolves the last state again)
		}
		m, err := meta.Accessor(obj)
		if err != nil {
			return nil, nil
		}
		l := m.GetLabels()
		if nsLabel != "" {
			ns = l[nsLabel]
		}
		if l[nameLabel] == "" || ns == "" {
			return nil, nil
		}
		return []relatedresource.Key{relatedresource.NewKey(ns, l[nameLabel])}, nil
	}
}

// After enqueues after a delay, so that a burst of children's changes makes one pass of their
// parent.
type After struct {
	Queue interface {
		EnqueueAfter(namespace, name string, d time.Duration)
	}
	Delay time.Duration
}

// Enqueue enqueues the parent after the delay.
func (a After) Enqueue(namespace, name string) { a.Queue.EnqueueAfter(namespace, name, a.Delay) }
