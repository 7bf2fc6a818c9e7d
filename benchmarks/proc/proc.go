// Package proc reads, for the benchmarks, a running process's resource use from /proc and its Go
// profiles, and an apiserver's count of writes.
package proc

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetgo/fleet/internal/bundlevalues"
	"github.com/fleetgo/fleet/internal/target"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// PeakRSS is the process's peak resident set size (VmHWM) in MiB; 0 when unreadable.
func PeakRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// CPUSeconds is the process's user and system CPU time.
func CPUSeconds(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(data)
	fields := strings.Fields(s[strings.LastIndex(s, ")")+2:])
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // clock ticks, 100 per second on Linux
}

// CPUSince is the CPU seconds each process of now (of names, or all) used since before, to the
// hundredth; a process before does not hold is left out.
func CPUSince(before, now map[string]float64, names ...string) map[string]float64 {
	out := map[string]float64{}
	for name, cpu := range now {
		if was, ok := before[name]; ok && (len(names) == 0 || slices.Contains(names, name)) {
			out[name] = math.Round((cpu-was)*100) / 100
		}
	}
	return out
}

// ServerPIDs finds the kube-apiserver and etcd processes of the local cluster whose folder is
// dir (they are started with paths in it), by name.
func ServerPIDs(dir string) map[string]int {
	out := map[string]int{}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil || !strings.Contains(string(data), dir) {
			continue
		}
		pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if err != nil {
			continue
		}
		cmd := strings.SplitN(string(data), "\x00", 2)[0]
		if name := filepath.Base(cmd); name == "kube-apiserver" || name == "etcd" {
			out[name] = pid
		}
	}
	return out
}

// SaveProfile stores one of a process's Go profiles, served by net/http/pprof at addr, in
// dir/file for `go tool pprof`.
func SaveProfile(addr, dir, query, file string) error {
	resp, err := http.Get("http://" + addr + "/debug/pprof/" + query)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	f, err := createIn(dir, file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// createIn creates file in dir, making dir first.
func createIn(dir, file string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return os.Create(filepath.Join(dir, file))
}

// SaveOwnHeap writes this process's heap profile (after a collection) to file in dir.
func SaveOwnHeap(dir, file string) error {
	f, err := createIn(dir, file)
	if err != nil {
		return err
	}
	defer f.Close()
	runtime.GC()
	return pprof.WriteHeapProfile(f)
}

// SaveOwnCPU writes this process's CPU profile over d to file in dir.
func SaveOwnCPU(ctx context.Context, dir, file string, d time.Duration) error {
	f, err := createIn(dir, file)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
	pprof.StopCPUProfile()
	return nil
}

// SaveAPIServerProfile writes the apiserver's profile (query: "heap", "profile?seconds=30")
// to file in dir; the apiserver serves /debug/pprof to its administrators.
func SaveAPIServerProfile(ctx context.Context, kube kubernetes.Interface, dir, query, file string) error {
	path, params, _ := strings.Cut(query, "?")
	req := kube.Discovery().RESTClient().Get().AbsPath("/debug/pprof/" + path)
	if params != "" {
		values, err := url.ParseQuery(params)
		if err != nil {
			return err
		}
		for k, vs := range values {
			for _, v := range vs {
				req = req.Param(k, v)
			}
		}
	}
	data, err := req.DoRaw(ctx)
	if err != nil {
		return err
	}
	f, err := createIn(dir, file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(data)
	return err
}

// WriteCounts reads the apiserver's count of mutating requests by verb and resource.
func WriteCounts(ctx context.Context, kube kubernetes.Interface) (map[string]int, error) {
	return counts(ctx, kube, false)
}

// RequestCounts reads the apiserver's count of all requests (reads and watches too) by verb and
// resource.
func RequestCounts(ctx context.Context, kube kubernetes.Interface) (map[string]int, error) {
	return counts(ctx, kube, true)
}

// IsWrite tells whether a key of RequestCounts is a mutating request.
func IsWrite(key string) bool {
	verb, _, _ := strings.Cut(key, " ")
	return writeVerb(verb)
}

func writeVerb(verb string) bool {
	return verb == "POST" || verb == "PUT" || verb == "PATCH" || verb == "APPLY" || verb == "DELETE"
}

// Delta is after minus before, leaving out what did not grow.
func Delta(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func counts(ctx context.Context, kube kubernetes.Interface, reads bool) (map[string]int, error) {
	data, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels := line[strings.Index(line, "{")+1 : strings.LastIndex(line, "}")]
		get := func(k string) string {
			for _, kv := range strings.Split(labels, ",") {
				if v, ok := strings.CutPrefix(kv, k+"=\""); ok {
					return strings.TrimSuffix(v, "\"")
				}
			}
			return ""
		}
		verb := get("verb")
		if !reads && !writeVerb(verb) {
			continue
		}
		key := verb + " " + get("resource")
		if sub := get("subresource"); sub != "" {
			key += "/" + sub
		}
		if code := get("code"); !strings.HasPrefix(code, "2") {
			key += " " + code
		}
		n, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		out[key] += int(n)
	}
	return out, nil
}

// EtcdWrites reads how many writes (creates, updates and deletes) the apiserver has made to etcd.
func EtcdWrites(ctx context.Context, kube kubernetes.Interface) (int, error) {
	data, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "etcd_requests_total{") {
			continue
		}
		if !strings.Contains(line, `operation="create"`) && !strings.Contains(line, `operation="update"`) && !strings.Contains(line, `operation="delete"`) {
			continue
		}
		n, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		total += int(n)
	}
	return total, nil
}

// QueuedWork sums the work queues' depths and unfinished work in a fleet process's metrics at url:
// zero when it has nothing left to do. It asks for those two families only: a whole scrape at
// 10,000 clusters renders hundreds of thousands of series, and a probe four times a second
// would be a good part of the CPU it measures.
func QueuedWork(url string) (float64, error) {
	resp, err := http.Get(url + "?name[]=workqueue_depth&name[]=workqueue_unfinished_work_seconds")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	sum, queues := 0.0, 0
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "workqueue_depth{") && !strings.HasPrefix(line, "workqueue_unfinished_work_seconds{") {
			continue
		}
		v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		sum += v
		queues++
	}
	if queues == 0 {
		// Not yet made, or not exported: no answer rather than "nothing queued".
		return 0, fmt.Errorf("%s: no work queue metrics", url)
	}
	return sum, nil
}

// HTTPStatus is the status code of a GET of url, 0 when it could not be asked.
func HTTPStatus(url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// MemTotalGiB is the machine's memory from /proc/meminfo.
func MemTotalGiB() float64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / (1 << 20)
		}
	}
	return 0
}

// Parallel runs f(0..n-1) on workers goroutines and returns the first error (the rest of the
// work is then skipped).
func Parallel(n, workers int, f func(int) error) error {
	var wg sync.WaitGroup
	var first atomic.Value
	next := atomic.Int64{}
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || first.Load() != nil {
					return
				}
				if err := f(i); err != nil {
					first.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, ok := first.Load().(error); ok {
		return err
	}
	return nil
}

// Deployment is the BundleDeployment the controller would write for Bundle b on the cluster of
// that name whose namespace is clusterNS, built the same way (what the plain client writes).
func Deployment(b *fleet.Bundle, cluster, clusterNS string) *fleet.BundleDeployment {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: cluster, Namespace: b.Namespace}}
	c.Status.Namespace = clusterNS
	manifest, _ := target.Manifest(b.Spec.Resources)
	ci := target.ClusterInfo{Cluster: c}
	m, _ := target.MatchCluster(b, ci)
	if m == nil {
		m = &target.Match{Options: b.Spec.BundleDeploymentOptions}
	}
	bd, _ := target.Deployment(b, ci, m, target.ContentName(manifest))
	return bd
}

// CreateDeployment writes bd as the manager does: the BundleDeployment without its Helm values,
// then its options Secret holding them (none without values). A plain client's writes are then
// the manager's, object for object.
func CreateDeployment(ctx context.Context, bds interface {
	Create(*fleet.BundleDeployment) (*fleet.BundleDeployment, error)
}, kube kubernetes.Interface, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
	data, err := bundlevalues.TakeFromDeployment(bd)
	if err != nil {
		return nil, err
	}
	created, err := bds.Create(bd)
	if err != nil || data == nil {
		return created, err
	}
	_, err = kube.CoreV1().Secrets(created.Namespace).Create(ctx, bundlevalues.DeploymentSecret(created, data), metav1.CreateOptions{})
	return created, err
}

// DeleteOptionsSecrets deletes the options Secrets of namespace ns (CreateDeployment's), so
// that the garbage collector does not delete them while a later measurement runs.
func DeleteOptionsSecrets(ctx context.Context, kube kubernetes.Interface, ns string) error {
	return kube.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{FieldSelector: "type=" + fleet.SecretTypeBundleDeploymentOptions})
}
