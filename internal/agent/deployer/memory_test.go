package deployer

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func bdAt(rv string) *fleet.BundleDeployment {
	return &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "c", Name: "b", ResourceVersion: rv}}
}

// A pass from the version its own status write replaced is stale; a newer version, an
// unchanged write or a deletion end that.
func TestPassMemory(t *testing.T) {
	var m passMemory
	if m.stale("c/b", bdAt("1")) {
		t.Fatal("stale before any write")
	}
	m.record("c/b", outcome{replaces: "1"})
	if _, ok := m.written("c/b", bdAt("2")); !ok {
		t.Fatal("the outcome was not handed on")
	}
	if _, ok := m.written("c/b", bdAt("2")); ok {
		t.Fatal("an outcome handed on twice")
	}
	if !m.stale("c/b", bdAt("1")) || m.stale("c/b", bdAt("2")) {
		t.Fatal("version 1, which the write replaced, should be stale, and only it")
	}
	// A stale pass's own outcome does not move what is waited out.
	m.record("c/b", outcome{stale: true})
	m.written("c/b", bdAt("2"))
	if !m.stale("c/b", bdAt("1")) {
		t.Fatal("a stale pass changed what is waited out")
	}
	// A write that changed nothing keeps the version: nothing new to wait out.
	m.record("c/b", outcome{replaces: "2"})
	m.written("c/b", bdAt("2"))
	if m.stale("c/b", bdAt("2")) {
		t.Fatal("an unchanged write made its own version stale")
	}
	m.forget("c/b")
	if m.stale("c/b", bdAt("1")) {
		t.Fatal("a deleted BundleDeployment still waits")
	}
}
