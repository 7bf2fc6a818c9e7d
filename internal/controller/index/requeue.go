package index

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
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
