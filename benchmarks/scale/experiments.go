package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/benchmarks/proc"
	"github.com/fleetgo/fleet/benchmarks/sim"
	"github.com/fleetgo/fleet/internal/harness/localserver"
	"github.com/fleetgo/fleet/internal/registration"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// rawNamespace holds the plain client's objects.
const rawNamespace = "raw"

// simLabels are the simulated clusters' labels; every Bundle of the benchmark targets them.
var simLabels = map[string]string{"env": "sim"}

// timed runs f(0..n-1) with 64 workers and returns each write's completion time since start.
func timed(n int, f func(int) error) ([]time.Duration, time.Duration, error) {
	done := make([]time.Duration, n)
	start := time.Now()
	err := proc.Parallel(n, 64, func(i int) error {
		if err := f(i); err != nil {
			return err
		}
		done[i] = time.Since(start)
		return nil
	})
	return done, time.Since(start), err
}

// rawIdentities is where the plain client puts its clusters' ServiceAccounts, as the manager puts
// agents' in registration.AgentIdentityNamespace.
const rawIdentities = "raw-agent-identities"

// rawRegistration creates, with a plain client, the objects the manager writes to register n
// clusters (namespace, ServiceAccount, Role, RoleBinding, credential Secret, ClusterRegistration,
// Cluster and its status), then deletes the Fleet kinds again (the controller is not running
// yet, so nothing acts on them).
func rawRegistration(ctx context.Context, e *env, n int) (time.Duration, int, error) {
	// Seven steps per cluster, the last of them two writes (the Cluster and its status).
	const perCluster, writes = 7, 8
	_, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rawIdentities}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return 0, 0, err
	}
	_, took, err := timed(n*perCluster, func(j int) error {
		i, step := j/perCluster, j%perCluster
		ns := fmt.Sprintf("raw-c-%05d", i)
		meta := metav1.ObjectMeta{Name: "fleet-agent", Namespace: ns}
		var err error
		switch step {
		case 0:
			_, err = e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		case 1:
			_, err = e.kube.CoreV1().ServiceAccounts(rawIdentities).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ns, Namespace: rawIdentities}},
				metav1.CreateOptions{})
		case 2:
			err = retryMissingNamespace(func() error {
				_, err := e.kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: registration.AgentRules()}, metav1.CreateOptions{})
				return err
			})
		case 3:
			err = retryMissingNamespace(func() error {
				_, err := e.kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "fleet-agent"},
					Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: ns, Namespace: rawIdentities}}}, metav1.CreateOptions{})
				return err
			})
		case 4:
			_, err = e.kube.CoreV1().Secrets(rawNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%05d", i), Namespace: rawNamespace},
				Data: map[string][]byte{registration.KeyToken: bytes.Repeat([]byte("t"), 900), registration.KeyClusterNamespace: []byte(ns)}}, metav1.CreateOptions{})
		case 5:
			_, err = e.api.ClusterRegistration().Create(&fleet.ClusterRegistration{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("raw-%05d", i), Namespace: rawNamespace},
				Spec: fleet.ClusterRegistrationSpec{ClientID: fmt.Sprintf("raw-%05d", i), ClientRandom: strings.Repeat("r", 64), ClusterLabels: simLabels}})
		case 6:
			c, err := e.api.Cluster().Create(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("raw-%05d", i), Namespace: rawNamespace, Labels: simLabels}})
			if err != nil {
				return err
			}
			c.Status.Namespace, c.Status.Agent.LastSeen = ns, metav1.Now()
			_, err = e.api.Cluster().UpdateStatus(c)
			return err
		}
		return err
	})
	if err != nil {
		return 0, 0, err
	}
	for _, del := range []func() error{
		func() error {
			return e.api.Cluster().DeleteCollection(rawNamespace, metav1.DeleteOptions{}, metav1.ListOptions{})
		},
		func() error {
			return e.api.ClusterRegistration().DeleteCollection(rawNamespace, metav1.DeleteOptions{}, metav1.ListOptions{})
		},
	} {
		if err := del(); err != nil {
			return 0, 0, err
		}
	}
	return took, n * writes, nil
}

// retryMissingNamespace retries f while its namespace is still being created by another worker.
func retryMissingNamespace(f func() error) error {
	for i := 0; ; i++ {
		err := f()
		if err == nil || !apierrors.IsNotFound(err) || i > 100 {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rawDeployment is the BundleDeployment the controller would write for bundle b on cluster i,
// in the plain client's namespace.
func rawDeployment(b *fleet.Bundle, i int) *fleet.BundleDeployment {
	bd := proc.Deployment(b, fmt.Sprintf("c-%05d", i), rawNamespace)
	bd.Name, bd.Namespace = fmt.Sprintf("%s-%05d", b.Name, i), rawNamespace
	return bd
}

// rawCreateDelete creates n BundleDeployments of b's shape with a plain client and writes each
// one's status as applied and Ready (what the manager and the agents write for a new bundle),
// then deletes them one by one: the machine's limit for both.
func rawCreateDelete(b *fleet.Bundle, bundles, clusters int, api interface {
	create(*fleet.BundleDeployment) error
	remove(name string) error
}) (created, deleted []time.Duration, createTook, deleteTook time.Duration, err error) {
	n := bundles * clusters
	name := func(j int) string { return fmt.Sprintf("%s-%d-%05d", b.Name, j/clusters, j%clusters) }
	created, createTook, err = timed(n, func(j int) error {
		bd := rawDeployment(b, j%clusters)
		bd.Name = name(j)
		return api.create(bd)
	})
	if err != nil {
		return
	}
	deleted, deleteTook, err = timed(n, func(j int) error { return api.remove(name(j)) })
	return
}

// rawBDs writes BundleDeployments with a plain client; withStatus also writes each one's status
// as a simulated agent reports a healthy deploy (reported).
type rawBDs struct {
	e          *env
	withStatus bool
}

func (r rawBDs) create(bd *fleet.BundleDeployment) error {
	created, err := proc.CreateDeployment(context.Background(), r.e.api.BundleDeployment(), r.e.kube, bd)
	if err != nil || !r.withStatus {
		return err
	}
	_, err = r.e.api.BundleDeployment().UpdateStatus(reported(created, 1))
	return err
}

// reported is bd with the status a simulated agent writes once release revision rev of it is
// deployed (sim.Reported): the plain client's status writes are the agents', conditions and
// resource counts included (917 bytes of status for the benchmark's Bundle), not a smaller one.
func reported(bd *fleet.BundleDeployment, rev int) *fleet.BundleDeployment {
	bd = bd.DeepCopy()
	bd.Status = sim.Reported(bd, rev, time.Now())
	return bd
}

func (r rawBDs) remove(name string) error {
	return r.e.api.BundleDeployment().Delete(rawNamespace, name, &metav1.DeleteOptions{})
}

// rawCommit is what a commit makes the manager and agents write for n clusters, by a plain
// client: each BundleDeployment's new deployment ID, then the status its agent reports for it
// (reported).
func rawCommit(ctx context.Context, e *env, b *fleet.Bundle, n int) (specs, statuses []time.Duration, took time.Duration, err error) {
	bds := make([]*fleet.BundleDeployment, n)
	if err = proc.Parallel(n, 64, func(i int) error {
		bd, err := e.api.BundleDeployment().Create(rawDeployment(b, i))
		bds[i] = bd
		return err
	}); err != nil {
		return
	}
	start := time.Now()
	specs, _, err = timed(n, func(i int) error {
		bd := bds[i].DeepCopy()
		bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID = "raw:2", "raw:2"
		upd, err := e.api.BundleDeployment().Update(bd)
		bds[i] = upd
		return err
	})
	if err != nil {
		return
	}
	offset := time.Since(start)
	statuses, _, err = timed(n, func(i int) error {
		_, err := e.api.BundleDeployment().UpdateStatus(reported(bds[i], 2))
		return err
	})
	for i := range statuses {
		statuses[i] += offset
	}
	took = time.Since(start)
	if err == nil {
		err = e.api.BundleDeployment().DeleteCollection(rawNamespace, metav1.DeleteOptions{}, metav1.ListOptions{})
	}
	return
}

// profileWindow, when -profile is set, takes CPU profiles of the manager, the apiserver and this
// process (the simulated agents) over the same d, after waiting after, in the background: what
// each spends an experiment's middle on. The files are <tag>-{manager,apiserver,sim}-cpu.pprof.
// At the window's end it also saves the manager's heap as its last collection left it, without
// forcing one (<tag>-manager-heap.pprof): what the manager holds in the middle of the work.
func profileWindow(ctx context.Context, e *env, tag string, after, d time.Duration) {
	if profileDir == "" {
		return
	}
	go func() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(after):
		}
		var wg sync.WaitGroup
		secs := fmt.Sprintf("profile?seconds=%d", int(d.Seconds()))
		report := func(what string, err error) {
			if err != nil {
				fmt.Fprintf(os.Stderr, "%s %s CPU profile: %v\n", tag, what, err)
			}
		}
		if e.profiles != "" {
			wg.Go(func() { report("manager", proc.SaveProfile(e.profiles, profileDir, secs, tag+"-manager-cpu.pprof")) })
		}
		wg.Go(func() {
			report("apiserver", proc.SaveAPIServerProfile(ctx, e.kube, profileDir, secs, tag+"-apiserver-cpu.pprof"))
		})
		wg.Go(func() { report("simulator", proc.SaveOwnCPU(ctx, profileDir, tag+"-sim-cpu.pprof", d)) })
		wg.Wait()
		if e.profiles != "" && ctx.Err() == nil {
			if err := proc.SaveProfile(e.profiles, profileDir, "heap", tag+"-manager-heap.pprof"); err != nil {
				fmt.Fprintf(os.Stderr, "%s manager heap profile: %v\n", tag, err)
			}
		}
	}()
}

// meter reads what the manager used and what the apiserver served during an experiment.
type meter struct {
	e        *env
	before   usage
	requests map[string]int
	etcd     int
}

func startMeter(ctx context.Context, e *env) (*meter, error) {
	requests, err := proc.RequestCounts(ctx, e.kube)
	if err != nil {
		return nil, err
	}
	etcd, err := proc.EtcdWrites(ctx, e.kube)
	return &meter{e: e, before: e.usage(""), requests: requests, etcd: etcd}, err
}

// done records in p the manager's CPU and peak RSS and the apiserver's requests since the
// start: its writes, and apart from them its reads (gets, lists, watches and discovery).
func (m *meter) done(ctx context.Context, p *Phase) error {
	p.finish(m.e, m.before)
	etcd, err := proc.EtcdWrites(ctx, m.e.kube)
	if err != nil {
		return err
	}
	p.EtcdWrites, p.EtcdDBMiB = etcd-m.etcd, m.e.servers().EtcdDBMiB
	after, err := proc.RequestCounts(ctx, m.e.kube)
	p.Writes, p.Reads = map[string]int{}, map[string]int{}
	for k, v := range proc.Delta(m.requests, after) {
		if proc.IsWrite(k) {
			p.Writes[k] = v
		} else {
			p.Reads[k] = v
		}
	}
	return err
}

// storm registers n simulated agents at once (or, with wave, that many at once, each wave once
// the one before has checked in) and waits until every Cluster is registered and its agent has
// checked in.
func storm(ctx context.Context, e *env, s *sim.Sim, n, wave int, timeout time.Duration) (Phase, error) {
	cw := clusterWatcher(ctx, e)
	defer cw.cancel()
	rw := registrationWatcher(ctx, e)
	defer rw.cancel()
	m, err := startMeter(ctx, e)
	if err != nil {
		return Phase{}, err
	}
	start := time.Now()
	preds := []func(*fleet.Cluster) bool{
		func(c *fleet.Cluster) bool { return c.Status.Namespace != "" },
		func(c *fleet.Cluster) bool { return !c.Status.Agent.LastSeen.IsZero() },
	}
	cc := cw.counter(ctx, preds)
	smp := sample(cc, start, []string{"fleet: Clusters registered", "fleet: agents checked in"})
	// Where the time goes between the two: credentials granted by the manager, and picked up by
	// the agents.
	granted := sample(rw.counter(ctx, []func(*fleet.ClusterRegistration) bool{
		func(r *fleet.ClusterRegistration) bool { return r.Status.Granted }}), start, []string{"fleet: credentials granted"})
	pickedUp := sampleCount(start, "fleet: agents have their credential", func() int { return len(s.Agents()) })
	if n >= 5000 {
		profileWindow(ctx, e, fmt.Sprintf("storm-%d", n), time.Minute, time.Minute)
	} else if n >= 1000 {
		// A storm of 1,000 lasts 40 to 60 s here: most of it.
		profileWindow(ctx, e, fmt.Sprintf("storm-%d", n), 2*time.Second, 30*time.Second)
	}
	if wave <= 0 || wave > n {
		wave = n
	}
	name := "registration storm"
	if wave < n {
		name = fmt.Sprintf("registration in waves of %d", wave)
	}
	var counts []int
	for done := 0; done < n && err == nil; done += wave {
		k := min(wave, n-done)
		regErr := make(chan error, 1)
		go func() { regErr <- s.Register(ctx, k) }()
		if counts, err = until(cc, timeout, func(c []int) bool { return c[1] >= done+k }); err == nil {
			err = <-regErr
		}
	}
	took := time.Since(start)
	series := append(smp.stop(), granted.stop()...)
	series = append(series, pickedUp.stop()...)
	if err != nil {
		return Phase{}, fmt.Errorf("%s: %v registered/checked in of %d: %w", name, counts, n, err)
	}
	p := Phase{Name: name, Seconds: took.Seconds(), Objects: n, Series: series}
	if err := m.done(ctx, &p); err != nil {
		return p, err
	}
	// None lost or duplicated: exactly n Clusters, each of one clientID.
	list, err := e.api.Cluster().List(fleet.DefaultNamespace, metav1.ListOptions{})
	if err != nil {
		return p, err
	}
	ids := map[string]int{}
	for _, c := range list.Items {
		ids[c.Annotations[registration.ClientIDAnnotation]]++
	}
	p.Check = fmt.Sprintf("%d Clusters for %d distinct clientIDs (want %d of each)", len(list.Items), len(ids), n)
	if len(list.Items) != n || len(ids) != n {
		return p, fmt.Errorf("%s: %s", name, p.Check)
	}
	return p, nil
}

// gitRepoRollout publishes a commit and waits until every simulated cluster runs it and the
// GitRepo is Ready. The first commit creates the GitRepo; later ones are announced by a GitHub
// push webhook.
type gitRepoRollout struct {
	e      *env
	git    *localserver.GitServer
	dir    string
	n      int
	commit int
}

const repoName = "scale"

func (g *gitRepoRollout) publish(ctx context.Context) (string, error) {
	g.commit++
	app := filepath.Join(g.dir, "app")
	if err := os.MkdirAll(app, 0o755); err != nil {
		return "", err
	}
	cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  commit: %q\n", fmt.Sprint(g.commit))
	if err := os.WriteFile(filepath.Join(app, "cm.yaml"), []byte(cm), 0o644); err != nil {
		return "", err
	}
	return g.git.Publish(ctx, repoName, "main", g.dir, fmt.Sprintf("commit %d", g.commit))
}

func (g *gitRepoRollout) run(ctx context.Context, name string, timeout time.Duration) (Phase, error) {
	e := g.e
	bw := bdWatcher(ctx, e)
	defer bw.cancel()
	m, err := startMeter(ctx, e)
	if err != nil {
		return Phase{}, err
	}
	start := time.Now()
	if g.n >= 5000 && g.commit >= 1 {
		// A commit's rollout (not the first deploy, not the garbage agent's run, which is at 1,000).
		profileWindow(ctx, e, fmt.Sprintf("commit-%d", g.n), 20*time.Second, 40*time.Second)
	}
	commit, err := g.publish(ctx)
	if err != nil {
		return Phase{}, err
	}
	updated := func(bd *fleet.BundleDeployment) bool {
		return bd.Labels[fleet.RepoLabel] == repoName && bd.Labels[fleet.CommitLabel] == commit
	}
	applied := func(bd *fleet.BundleDeployment) bool {
		return updated(bd) && bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID
	}
	ready := func(bd *fleet.BundleDeployment) bool {
		return applied(bd) && bd.Status.Ready && bd.Status.Display.State == string(fleet.Ready)
	}
	preds := []func(*fleet.BundleDeployment) bool{updated, applied, ready}
	bc := bw.counter(ctx, preds)
	times := bw.readyTimes(ctx, start, ready)
	smp := sample(bc, start, []string{"fleet: BundleDeployments at the commit", "fleet: applied", "fleet: Ready"})
	if g.commit == 1 {
		err = g.createGitRepo()
	} else {
		err = g.webhook(commit)
	}
	if err != nil {
		smp.stop()
		return Phase{}, err
	}
	counts, err := until(bc, timeout, func(c []int) bool { return c[2] >= g.n })
	allReady := time.Since(start)
	if err == nil {
		err = waitFor(timeout, func() (bool, error) {
			gr, err := e.api.GitRepo().Get(fleet.DefaultNamespace, repoName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			c := fleet.FindCondition(gr.Status.Conditions, fleet.ConditionReady)
			return gr.Status.Commit == commit && c != nil && c.Status == corev1.ConditionTrue && gr.Status.ReadyClusters == g.n, nil
		})
	}
	took := time.Since(start)
	series := smp.stop()
	p50, p99 := times.percentiles()
	if err != nil {
		return Phase{}, fmt.Errorf("%s: %v of %d at the commit/applied/ready: %w", name, counts, g.n, err)
	}
	p := Phase{Name: name, Seconds: took.Seconds(), Objects: g.n, Series: series, ReadyP50: p50, ReadyP99: p99,
		Check: fmt.Sprintf("all %d BundleDeployments Ready after %.1f s, the GitRepo Ready at %s after %.1f s", g.n, allReady.Seconds(), commit[:8], took.Seconds())}
	return p, m.done(ctx, &p)
}

func (g *gitRepoRollout) createGitRepo() error {
	_, err := g.e.api.GitRepo().Create(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: repoName, Namespace: fleet.DefaultNamespace},
		Spec: fleet.GitRepoSpec{Repo: g.git.RepoURL(repoName), Branch: "main", Paths: []string{"app"},
			// The webhook, not polling, announces commits.
			PollingInterval: &metav1.Duration{Duration: time.Hour},
			Targets:         []fleet.GitTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: simLabels}}}}})
	return err
}

// webhook posts GitHub's push event for the commit to the manager's webhook receiver.
func (g *gitRepoRollout) webhook(commit string) error {
	body, err := json.Marshal(map[string]any{"ref": "refs/heads/main", "after": commit,
		"repository": map[string]any{"clone_url": g.git.RepoURL(repoName)}})
	if err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodPost, "http://"+g.e.webhook+"/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}

// scaleBundle is bundle i of a creation experiment: one ConfigMap for every simulated cluster.
func scaleBundle(i int) *fleet.Bundle {
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%03d", i), Namespace: fleet.DefaultNamespace, Labels: map[string]string{"scale": "bench"}},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "scale", Helm: &fleet.HelmOptions{
				Values: &fleet.GenericMap{Data: map[string]any{"cluster": "${ .ClusterName }", "replicas": float64(2)}},
			}},
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: scale-%d\n", i)}},
			Targets:   []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: simLabels}}},
		},
	}
}

// createBundles creates bundles Bundles targeting every simulated cluster and waits until all
// their BundleDeployments exist (the creation rate) and are Ready.
func createBundles(ctx context.Context, e *env, bundles, n int, timeout time.Duration) (Phase, error) {
	bw := bdWatcher(ctx, e)
	defer bw.cancel()
	m, err := startMeter(ctx, e)
	if err != nil {
		return Phase{}, err
	}
	ours := func(bd *fleet.BundleDeployment) bool {
		return strings.HasPrefix(bd.Labels[fleet.BundleLabel], "bench-")
	}
	applied := func(bd *fleet.BundleDeployment) bool {
		return ours(bd) && bd.Spec.DeploymentID != "" && bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID
	}
	ready := func(bd *fleet.BundleDeployment) bool { return applied(bd) && bd.Status.Ready }
	preds := []func(*fleet.BundleDeployment) bool{ours, applied, ready}
	start := time.Now()
	if bundles*n >= 50000 {
		profileWindow(ctx, e, fmt.Sprintf("create-%dx%d", bundles, n), 2*time.Minute, time.Minute)
	}
	bc := bw.counter(ctx, preds)
	times := bw.readyTimes(ctx, start, ready)
	smp := sample(bc, start, []string{"fleet: BundleDeployments created", "fleet: applied", "fleet: Ready"})
	for i := range bundles {
		if _, err := e.api.Bundle().Create(scaleBundle(i)); err != nil {
			smp.stop()
			return Phase{}, err
		}
	}
	total := bundles * n
	var created time.Duration
	counts, err := until(bc, timeout, func(c []int) bool {
		if created == 0 && c[0] >= total {
			created = time.Since(start)
		}
		return c[2] >= total
	})
	took := time.Since(start)
	series := smp.stop()
	if err != nil {
		return Phase{}, fmt.Errorf("creating %d x %d: %v created/applied/ready: %w", bundles, n, counts, err)
	}
	p := Phase{Name: fmt.Sprintf("create %d bundles x %d clusters", bundles, n), Seconds: created.Seconds(), Objects: total,
		ReadySeconds: took.Seconds(), Series: series}
	p.ReadyP50, p.ReadyP99 = times.percentiles()
	return p, m.done(ctx, &p)
}

// deleteBundles deletes the creation experiment's Bundles and waits until every one of their
// BundleDeployments is gone.
func deleteBundles(ctx context.Context, e *env, bundles, n int, timeout time.Duration) (Phase, error) {
	bw := bdWatcher(ctx, e)
	defer bw.cancel()
	m, err := startMeter(ctx, e)
	if err != nil {
		return Phase{}, err
	}
	ours := func(bd *fleet.BundleDeployment) bool {
		return strings.HasPrefix(bd.Labels[fleet.BundleLabel], "bench-")
	}
	preds := []func(*fleet.BundleDeployment) bool{ours}
	start := time.Now()
	if bundles*n >= 50000 {
		profileWindow(ctx, e, fmt.Sprintf("delete-%dx%d", bundles, n), 30*time.Second, 30*time.Second)
	}
	bc := bw.counter(ctx, preds)
	smp := sample(bc, start, []string{"fleet: BundleDeployments left"})
	for i := range bundles {
		if err := e.api.Bundle().Delete(fleet.DefaultNamespace, scaleBundle(i).Name, &metav1.DeleteOptions{}); err != nil {
			smp.stop()
			return Phase{}, err
		}
	}
	counts, err := until(bc, timeout, func(c []int) bool { return c[0] == 0 })
	took := time.Since(start)
	series := smp.stop()
	if err != nil {
		return Phase{}, fmt.Errorf("deleting %d x %d: %v left: %w", bundles, n, counts, err)
	}
	p := Phase{Name: fmt.Sprintf("delete %d bundles x %d clusters", bundles, n), Seconds: took.Seconds(), Objects: bundles * n, Series: series}
	return p, m.done(ctx, &p)
}

// idle measures what standing still costs: manager CPU and every apiserver request (its writes
// and reads, as every phase records them) while the simulated agents keep checking in.
func idle(ctx context.Context, e *env, d time.Duration) (Phase, error) {
	if profileDir != "" && e.profiles != "" {
		// The heap after the largest rollout, before the window (the collection it forces is not
		// charged to standing still).
		if err := proc.SaveProfile(e.profiles, profileDir, "heap?gc=1", "heap-idle.pprof"); err != nil {
			fmt.Fprintln(os.Stderr, "idle heap profile:", err)
		}
	}
	m, err := startMeter(ctx, e)
	if err != nil {
		return Phase{}, err
	}
	if profileDir != "" && e.profiles != "" {
		// The first minute (the rollout's tail) and the rest (check-ins only) apart.
		go func() {
			first := min(d, time.Minute)
			if err := proc.SaveProfile(e.profiles, profileDir, fmt.Sprintf("profile?seconds=%d", int(first.Seconds())), "idle-cpu.pprof"); err != nil {
				fmt.Fprintln(os.Stderr, "idle profile:", err)
				return
			}
			if rest := int((d - first - 5*time.Second).Seconds()); rest > 0 {
				if err := proc.SaveProfile(e.profiles, profileDir, fmt.Sprintf("profile?seconds=%d", rest), "idle-cpu-rest.pprof"); err != nil {
					fmt.Fprintln(os.Stderr, "idle profile:", err)
				}
			}
		}()
	}
	start := time.Now()
	time.Sleep(d)
	p := Phase{Name: fmt.Sprintf("idle %s", d), Seconds: d.Seconds()}
	if err := m.done(ctx, &p); err != nil {
		return p, err
	}
	for _, counts := range []map[string]int{p.Writes, p.Reads} {
		for _, v := range counts {
			p.Objects += v
		}
	}
	// Listed after the window's counts, so that the listing is not charged to it.
	if p.Events, err = eventsSince(ctx, e.kube, start); err != nil {
		return p, err
	}
	p.Check = fmt.Sprintf("manager CPU %.1f%% of one core on average", 100*p.CPU/d.Seconds())
	return p, nil
}

// eventsSince counts the Events of every namespace first recorded at or after start, by
// "source component: reason".
func eventsSince(ctx context.Context, kube kubernetes.Interface, start time.Time) (map[string]int, error) {
	out := map[string]int{}
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := kube.CoreV1().Events("").List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("listing events: %w", err)
		}
		for _, ev := range list.Items {
			first := ev.FirstTimestamp.Time
			if first.IsZero() {
				first = ev.EventTime.Time
			}
			if !first.Before(start.Truncate(time.Second)) {
				out[ev.Source.Component+": "+ev.Reason]++
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// badInput plays two misbehaving agents at scale: one reports garbage status (an unknown state,
// then an oversized status) in a loop while the others roll out a commit; then a Cluster is
// deleted and its agent must be refused at once.
func badInput(ctx context.Context, e *env, s *sim.Sim, g *gitRepoRollout, timeout time.Duration) (Phase, []string, error) {
	agents := s.Agents()
	garbage, revoked := agents[0], agents[len(agents)-1]
	list, err := garbage.Client().List(garbage.Credential.ClusterNamespace, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		return Phase{}, nil, fmt.Errorf("the garbage agent sees no BundleDeployment: %v", err)
	}
	bdName := list.Items[0].Name
	var notes []string
	var mu sync.Mutex
	var rejected, accepted int
	note := func(kind string, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err == nil {
			accepted++
			return
		}
		rejected++
		if rejected <= 2 {
			notes = append(notes, fmt.Sprintf("%s: %v", kind, truncate(err.Error(), 300)))
		}
	}
	gctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; gctx.Err() == nil; i++ {
			bd, err := garbage.Client().Get(garbage.Credential.ClusterNamespace, bdName, metav1.GetOptions{})
			if err != nil {
				continue
			}
			kind := "unknown state"
			if i%2 == 0 {
				bd.Status.Display.State = "Exploded"
			} else {
				kind = "oversized status"
				fleet.SetCondition(&bd.Status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, "Garbage", strings.Repeat("x", 4<<20), time.Now())
			}
			_, err = garbage.Client().UpdateStatus(bd)
			note(kind, err)
		}
	})
	p, err := g.run(ctx, "commit to Ready while one agent writes garbage", timeout)
	stop()
	wg.Wait()
	if err != nil {
		return p, notes, err
	}
	p.Check += fmt.Sprintf("; the garbage agent's writes: %d rejected, %d accepted", rejected, accepted)
	if accepted > 0 {
		return p, notes, fmt.Errorf("garbage status accepted %d times", accepted)
	}
	// A deleted Cluster's agent is refused at once.
	start := time.Now()
	if err := e.api.Cluster().Delete(fleet.DefaultNamespace, revoked.Credential.ClusterName, &metav1.DeleteOptions{}); err != nil {
		return p, notes, err
	}
	var refusal error
	err = waitFor(time.Minute, func() (bool, error) {
		_, err := revoked.Client().List(revoked.Credential.ClusterNamespace, metav1.ListOptions{Limit: 1})
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			refusal = err
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return p, notes, fmt.Errorf("the deleted Cluster's agent was still served after a minute")
	}
	revoked.Stop()
	notes = append(notes, fmt.Sprintf("deleted Cluster's agent refused %.2f s after the deletion: %s", time.Since(start).Seconds(), truncate(refusal.Error(), 200)))
	return p, notes, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
