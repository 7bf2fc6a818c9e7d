package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"filippo.io/age"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/benchmarks/sim"
	"github.com/fleetgo/fleet/internal/controller/bundle"
	"github.com/fleetgo/fleet/internal/sopsfile/sopstest"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// The sealed-secrets experiment: a Bundle whose folder holds a SOPS-encrypted Secret goes to
// every simulated cluster, each with its own sealing key (the simulated agents unseal what the
// manager sealed to them before reporting it applied); then the secret's value changes in the
// file, and every cluster gets it sealed again.
const secretsBundle = "sealed"

// secretsLimit is the goal: a changed value sealed and delivered to every cluster within it.
const secretsLimit = 2 * time.Minute

// SecretsRun is the experiment's result.
type SecretsRun struct {
	Date     string  `json:"date"`
	Cores    int     `json:"cores"`
	MemGiB   float64 `json:"memoryGiB"`
	Clusters int     `json:"clusters"`
	// First is from the Bundle's creation, Change from the changed value's, until every cluster
	// reported it applied (its sealed copy unsealed).
	First  SecretsPhase `json:"first"`
	Change SecretsPhase `json:"change"`
	// LimitSeconds is the goal for Change.
	LimitSeconds float64 `json:"limitSeconds"`
	// Unsealed counts the copies the simulated agents opened; UnsealFailures those that did not.
	Unsealed       int64   `json:"unsealed"`
	UnsealFailures int64   `json:"unsealFailures"`
	Phases         []Phase `json:"phases"`
}

// SecretsPhase is one delivery of the secret to every cluster.
type SecretsPhase struct {
	Seconds float64 `json:"seconds"`
	// ManagerCPUSeconds over the phase, and per cluster in milliseconds (decrypting once per
	// pass, sealing once per cluster, writing the deployment).
	ManagerCPUSeconds float64 `json:"managerCPUSeconds"`
	CPUPerClusterMs   float64 `json:"cpuPerClusterMs"`
	PeakRSSMiB        float64 `json:"managerPeakRSSMiB"`
}

// benchT reports sopstest's failures as panics: the benchmark has no testing.T.
type benchT struct{}

func (benchT) Helper()           {}
func (benchT) Fatal(args ...any) { panic(fmt.Sprint(args...)) }

func runSecrets(fleetBin string, n int, checkin time.Duration) (r SecretsRun, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r = SecretsRun{Date: time.Now().UTC().Format(time.RFC3339), Cores: runtime.NumCPU(), MemGiB: proc.MemTotalGiB(), Clusters: n,
		LimitSeconds: secretsLimit.Seconds()}
	e, s, ph, err := simulated(ctx, fleetBin, "secrets", n, checkin, sim.Options{Sealing: true})
	if e != nil {
		defer e.stop()
	}
	if s != nil {
		defer func() { r.Unsealed, r.UnsealFailures = s.Unsealed.Load(), s.UnsealFailures.Load() }()
	}
	r.Phases = append(r.Phases, ph)
	if err != nil {
		return r, err
	}
	recipient, err := adminKey(ctx, e)
	if err != nil {
		return r, err
	}
	bds := bdWatcher(ctx, e)
	defer bds.cancel()
	for i, value := range []string{"first-value", "changed-value"} {
		name := []string{"first delivery of a sealed secret", "a changed secret value"}[i]
		enc := sopstest.Encrypt(benchT{}, "db.yaml", []byte("apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\nstringData:\n  password: "+value+"\n"), recipient, nil)
		sp, ph, err := deliverSecret(ctx, e, bds, n, name, string(enc), i == 0)
		r.Phases = append(r.Phases, ph)
		if i == 0 {
			r.First = sp
		} else {
			r.Change = sp
		}
		if err != nil {
			return r, err
		}
		fmt.Printf("[secrets %d] %s: %.1f s, manager CPU %.1f s (%.2f ms per cluster)\n", n, name, sp.Seconds, sp.ManagerCPUSeconds, sp.CPUPerClusterMs)
	}
	return r, nil
}

// adminKey gives the manager an age key for fleet-default's SOPS files, as an admin does.
func adminKey(ctx context.Context, e *env) (string, error) {
	id, err := age.GenerateX25519Identity()
	if err != nil {
		return "", err
	}
	const ns = "cattle-fleet-system"
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	_, err = e.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sops-bench",
		Annotations: map[string]string{bundle.SOPSNamespacesAnnotation: fleet.DefaultNamespace}},
		Data: map[string][]byte{"bench.agekey": []byte(id.String())}}, metav1.CreateOptions{})
	return id.Recipient().String(), err
}

// deliverSecret writes the Bundle with the SOPS file content (creating it when first) and waits
// until every cluster reported applied a deployment other than those it ran before.
func deliverSecret(ctx context.Context, e *env, bds *watcher[*fleet.BundleDeployment], n int, name, content string, first bool) (SecretsPhase, Phase, error) {
	ours := func(bd *fleet.BundleDeployment) bool { return bd.Labels[fleet.BundleLabel] == secretsBundle }
	old := deploymentIDs(bds, ours)
	applied := func(bd *fleet.BundleDeployment) bool {
		return !old[bd.Spec.DeploymentID] && len(bd.Spec.SealedFiles) == 1 && bd.Spec.DeploymentID != "" &&
			bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID
	}
	return meteredDelivery(ctx, e, bds, n, name, "applied with the new sealed copy", secretsLimit+5*time.Minute, ours, applied,
		func() error { return writeSecretBundle(e, content, first) })
}

// deploymentIDs are the deployment IDs of the deployments ours picks, as the watcher has them.
func deploymentIDs(bds *watcher[*fleet.BundleDeployment], ours func(*fleet.BundleDeployment) bool) map[string]bool {
	old := map[string]bool{}
	for _, o := range bds.inf.GetStore().List() {
		if bd := o.(*fleet.BundleDeployment); ours(bd) {
			old[bd.Spec.DeploymentID] = true
		}
	}
	return old
}

// meteredDelivery runs write and waits (up to limit) until n of the deployments ours picks are
// done, metering the manager over the phase.
func meteredDelivery(ctx context.Context, e *env, bds *watcher[*fleet.BundleDeployment], n int, name, doneName string, limit time.Duration,
	ours, done func(*fleet.BundleDeployment) bool, write func() error) (SecretsPhase, Phase, error) {
	m, err := startMeter(ctx, e)
	if err != nil {
		return SecretsPhase{}, Phase{}, err
	}
	c := bds.counter(ctx, []func(*fleet.BundleDeployment) bool{ours, func(bd *fleet.BundleDeployment) bool { return ours(bd) && done(bd) }})
	start := time.Now()
	smp := sample(c, start, []string{"deployments", doneName})
	if err := write(); err != nil {
		return SecretsPhase{}, Phase{}, err
	}
	_, err = until(c, limit, func(counts []int) bool { return counts[1] == n })
	ph := Phase{Name: name, Seconds: time.Since(start).Seconds(), Objects: n, Series: smp.stop()}
	if merr := m.done(ctx, &ph); merr != nil && err == nil {
		err = merr
	}
	sp := SecretsPhase{Seconds: ph.Seconds, ManagerCPUSeconds: ph.CPU, PeakRSSMiB: ph.PeakMiB, CPUPerClusterMs: ph.CPU * 1000 / float64(n)}
	if err != nil {
		return sp, ph, fmt.Errorf("%s: %w", name, err)
	}
	return sp, ph, nil
}

// writeSecretBundle creates the Bundle, or gives it the new content.
func writeSecretBundle(e *env, content string, first bool) error {
	res := []fleet.BundleResource{{Name: "db.yaml", Content: content}}
	if first {
		b := scaleBundle(0)
		b.Name, b.Spec.Resources = secretsBundle, res
		_, err := e.api.Bundle().Create(b)
		return err
	}
	return waitFor(time.Minute, func() (bool, error) {
		b, err := e.api.Bundle().Get(fleet.DefaultNamespace, secretsBundle, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		b.Spec.Resources = res
		_, err = e.api.Bundle().Update(b)
		return err == nil, nil
	})
}

// simulated starts an experiment's manager and n simulated agents (o: how they behave; their
// token, names and labels are filled in) and registers them all: the registration storm's phase.
// The env, when not nil, is the caller's to stop.
func simulated(ctx context.Context, fleetBin, name string, n int, checkin time.Duration, o sim.Options) (*env, *sim.Sim, Phase, error) {
	e, err := newEnv(ctx, fmt.Sprintf("%s%d", name, n), checkin)
	if err != nil {
		return nil, nil, Phase{}, err
	}
	if err := e.startController(fleetBin, ""); err != nil {
		return e, nil, Phase{}, err
	}
	if o.Values, err = e.token(ctx, "sim"); err != nil {
		return e, nil, Phase{}, err
	}
	o.Prefix, o.Labels, o.CheckinInterval = "sim", simLabels, checkin
	s := sim.New(o)
	s.Start(ctx)
	fmt.Printf("[%s %d] registering the simulated clusters\n", name, n)
	ph, err := storm(ctx, e, s, n, 0, 10*time.Minute+time.Duration(n)*100*time.Millisecond)
	return e, s, ph, err
}
