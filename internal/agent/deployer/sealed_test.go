package deployer

import (
	"strings"
	"testing"

	"filippo.io/age"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/render"
	"github.com/fleetgo/fleet/internal/sealing"
	"github.com/fleetgo/fleet/internal/sopsfile/sopstest"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// sealedFor is bd's copy of file name (ciphertext) as the manager seals it to public for the
// deployment bd: sealed data, with the source and context the agent checks.
func sealedFor(t *testing.T, public string, bd *fleet.BundleDeployment, name string, ciphertext, plain []byte) fleet.SealedFile {
	t.Helper()
	bind := sealing.Binding(bd.Namespace, bd.Name, name)
	s, err := sealing.Seal(public, bind, map[string][]byte{"file": plain})
	if err != nil {
		t.Fatal(err)
	}
	return fleet.SealedFile{Name: name, Sealed: s, Source: sealing.Source(ciphertext, public, bind)}
}

// An agent opens the copy sealed to its own cluster's key for its own deployment, and nothing
// else: cluster A's copy given to cluster B's agent (under B's source, so that the agent tries
// it) does not open, nor does a copy made for another deployment of the same cluster.
func TestAnAgentOpensOnlyWhatWasSealedToItsCluster(t *testing.T) {
	team, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	plain := []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: hunter2\n")
	cipher := sopstest.Encrypt(t, "db.yaml", plain, team.Recipient().String(), nil)
	files := render.Files{"db.yaml": cipher, "cm.yaml": []byte("kind: ConfigMap\n")}
	privA, pubA, _ := sealing.NewKey()
	privB, pubB, _ := sealing.NewKey()
	bdA := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-a", Name: "app"}}
	bdB := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-b", Name: "app"}}
	agentA := &handler{sealing: SealingKey{Private: privA, Public: pubA}}
	agentB := &handler{sealing: SealingKey{Private: privB, Public: pubB}}

	bdA.Spec.SealedFiles = []fleet.SealedFile{sealedFor(t, pubA, bdA, "db.yaml", cipher, plain)}
	got, err := agentA.unsealed(bdA, files)
	if err != nil || string(got["db.yaml"]) != string(plain) || string(files["db.yaml"]) != string(cipher) {
		t.Fatalf("cluster A's agent with its own copy: %v, %q", err, got["db.yaml"])
	}

	aCopy := bdA.Spec.SealedFiles[0]
	aCopy.Source = sealing.Source(cipher, pubB, sealing.Binding(bdB.Namespace, bdB.Name, "db.yaml"))
	bdB.Spec.SealedFiles = []fleet.SealedFile{aCopy}
	if _, err := agentB.unsealed(bdB, files); err == nil || !strings.Contains(err.Error(), "unsealing") {
		t.Fatalf("cluster B's agent opened cluster A's copy: %v", err)
	}
	bdB.Spec.SealedFiles = []fleet.SealedFile{bdA.Spec.SealedFiles[0]}
	if _, err := agentB.unsealed(bdB, files); err == nil || !strings.Contains(err.Error(), "another ciphertext or to another key") {
		t.Fatalf("cluster B's agent with A's copy as the manager made it: %v", err)
	}

	other := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-a", Name: "other"}}
	moved := sealedFor(t, pubA, other, "db.yaml", cipher, plain)
	moved.Source = sealing.Source(cipher, pubA, sealing.Binding(bdA.Namespace, bdA.Name, "db.yaml"))
	bdA.Spec.SealedFiles = []fleet.SealedFile{moved}
	if _, err := agentA.unsealed(bdA, files); err == nil || !strings.Contains(err.Error(), "sealed for another place") {
		t.Fatalf("a copy sealed for another deployment of the cluster: %v", err)
	}
	bdA.Spec.SealedFiles = nil
	if _, err := agentA.unsealed(bdA, files); err == nil || !strings.Contains(err.Error(), "secret file db.yaml: not sealed to this cluster yet") {
		t.Fatalf("no sealed copy: %v", err)
	}
}
