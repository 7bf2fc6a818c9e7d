package testenv

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Events are the messages of the Events recorded on one object, by reason.
func Events(ctx context.Context, kube kubernetes.Interface, namespace, kind, name string) (map[string][]string, error) {
	sel := fields.Set{"involvedObject.kind": kind, "involvedObject.name": name}.AsSelector().String()
	list, err := kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for _, e := range list.Items {
		out[e.Reason] = append(out[e.Reason], e.Message)
	}
	return out, nil
}
