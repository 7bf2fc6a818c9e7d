package helmdeployer

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/fleetgo/fleet/internal/helmrelease"
)

const crdAndConfigMap = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: elsewhere}
`

// A bundle's CRDs outlive it unless deleteCRDResources: every custom resource would go with them.
func TestPostRendererKeepsCRDs(t *testing.T) {
	for _, deleteCRDs := range []bool{false, true} {
		p := &postRenderer{setID: SetID("app"), deleteCRDs: deleteCRDs}
		out, err := p.Run(bytes.NewBufferString(crdAndConfigMap))
		if err != nil {
			t.Fatal(err)
		}
		objs, _ := ParseManifest(out.String())
		if got := objs[0].GetAnnotations()[KeepPolicyAnnotation] == KeepPolicy; got == deleteCRDs {
			t.Errorf("deleteCRDResources %v: CRD kept %v", deleteCRDs, got)
		}
		if _, ok := objs[1].GetAnnotations()[KeepPolicyAnnotation]; ok {
			t.Errorf("deleteCRDResources %v: a ConfigMap is not kept without keepResources", deleteCRDs)
		}
	}
}

func TestPostRendererForcesNamespace(t *testing.T) {
	namespaced := func(gvk schema.GroupVersionKind) (bool, error) { return gvk.Kind != "CustomResourceDefinition", nil }
	p := &postRenderer{setID: SetID("app"), namespace: "team", namespaced: namespaced}
	out, err := p.Run(bytes.NewBufferString("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: kube-system}\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n"))
	if err != nil {
		t.Fatal(err)
	}
	objs, _ := ParseManifest(out.String())
	for _, o := range objs {
		if o.GetNamespace() != "team" {
			t.Errorf("%s/%s in namespace %q, want team", o.GetKind(), o.GetName(), o.GetNamespace())
		}
	}
	_, err = p.Run(bytes.NewBufferString(crdAndConfigMap))
	if err == nil || !helmrelease.IsPermanent(err) || !strings.Contains(err.Error(), "CustomResourceDefinition widgets.example.com is cluster-scoped") {
		t.Errorf("a cluster-scoped object with the namespace option: %v", err)
	}
}
