package main

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Series is one line of a progress plot: how many objects were in some state, against seconds
// since the experiment started.
type Series struct {
	Name    string    `json:"name"`
	Seconds []float64 `json:"seconds"`
	Count   []int     `json:"count"`
}

// watcher keeps an admin cache of one kind on the manager, to count objects by state.
type watcher[T runtime.Object] struct {
	inf    cache.SharedIndexInformer
	cancel context.CancelFunc
}

func newWatcher[T runtime.Object, L runtime.Object](ctx context.Context, obj T, ns string,
	list func(string, metav1.ListOptions) (L, error), w func(string, metav1.ListOptions) (watch.Interface, error)) *watcher[T] {
	inf := cache.NewSharedIndexInformer(&cache.ListWatch{
		ListFunc:  func(o metav1.ListOptions) (runtime.Object, error) { return list(ns, o) },
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return w(ns, o) },
	}, obj, 0, cache.Indexers{})
	ctx, cancel := context.WithCancel(ctx)
	go inf.Run(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)
	return &watcher[T]{inf: inf, cancel: cancel}
}

// counter keeps how many of a watcher's objects each predicate holds for, from the watcher's
// events: each event costs a few predicate calls. Counting by going over the cache instead, four
// times a second for the plot and five for the wait, was most of this process's CPU at 50,000
// BundleDeployments (a core's 0.6 of the two the whole system had). The predicates must read the
// object alone.
type counter[T runtime.Object] struct {
	preds []func(T) bool
	n     []atomic.Int64
}

// counter starts counting the watcher's objects by preds; its counts include every object cached
// before it started.
func (w *watcher[T]) counter(ctx context.Context, preds []func(T) bool) *counter[T] {
	c := &counter[T]{preds: preds, n: make([]atomic.Int64, len(preds))}
	reg, _ := w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.add(obj, 1) },
		UpdateFunc: func(old, obj any) { c.add(old, -1); c.add(obj, 1) },
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = gone.Obj
			}
			c.add(obj, -1)
		},
	})
	if reg != nil {
		cache.WaitForCacheSync(ctx.Done(), reg.HasSynced)
	}
	return c
}

func (c *counter[T]) add(obj any, d int64) {
	t, ok := obj.(T)
	if !ok {
		return
	}
	for i, p := range c.preds {
		if p(t) {
			c.n[i].Add(d)
		}
	}
}

// counts returns the counts, one per predicate.
func (c *counter[T]) counts() []int {
	out := make([]int, len(c.n))
	for i := range c.n {
		out[i] = int(c.n[i].Load())
	}
	return out
}

// readyTimes records, per object, when a predicate first held for it since start.
type readyTimes struct {
	mu    sync.Mutex
	start time.Time
	at    map[string]time.Duration
}

// readyTimes starts recording when pred first holds for each of the watcher's objects.
func (w *watcher[T]) readyTimes(ctx context.Context, start time.Time, pred func(T) bool) *readyTimes {
	r := &readyTimes{start: start, at: map[string]time.Duration{}}
	see := func(obj any) {
		t, ok := obj.(T)
		if !ok || !pred(t) {
			return
		}
		key, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if _, seen := r.at[key]; !seen {
			r.at[key] = time.Since(r.start)
		}
	}
	reg, _ := w.inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    see,
		UpdateFunc: func(_, obj any) { see(obj) },
	})
	if reg != nil {
		cache.WaitForCacheSync(ctx.Done(), reg.HasSynced)
	}
	return r
}

// percentiles are the 50th and 99th percentiles of the recorded times, in seconds.
func (r *readyTimes) percentiles() (p50, p99 float64) {
	r.mu.Lock()
	ds := make([]time.Duration, 0, len(r.at))
	for _, d := range r.at {
		ds = append(ds, d)
	}
	r.mu.Unlock()
	return percentile(ds, 50), percentile(ds, 99)
}

// percentile is the p-th percentile of ds in seconds (nearest rank), 0 for none.
func percentile(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := int(math.Ceil(p/100*float64(len(ds)))) - 1
	return math.Round(ds[max(rank, 0)].Seconds()*100) / 100
}

// sampler records counts, each a line named in order, every quarter second from start until
// stopped.
type sampler struct {
	series []Series
	done   chan struct{}
	ended  chan struct{}
}

func newSampler(start time.Time, names []string, counts func() []int) *sampler {
	s := &sampler{done: make(chan struct{}), ended: make(chan struct{})}
	for _, n := range names {
		s.series = append(s.series, Series{Name: n})
	}
	record := func() {
		at := time.Since(start).Seconds()
		for i, c := range counts() {
			s.series[i].Seconds = append(s.series[i].Seconds, at)
			s.series[i].Count = append(s.series[i].Count, c)
		}
	}
	record()
	go func() {
		defer close(s.ended)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				record()
				return
			case <-t.C:
				record()
			}
		}
	}()
	return s
}

// sample records the counter's counts, each a line named in order.
func sample[T runtime.Object](c *counter[T], start time.Time, names []string) *sampler {
	return newSampler(start, names, c.counts)
}

// sampleCount records one count, read by f.
func sampleCount(start time.Time, name string, f func() int) *sampler {
	return newSampler(start, []string{name}, func() []int { return []int{f()} })
}

// stop ends the sampling (after one last sample) and returns the series.
func (s *sampler) stop() []Series {
	close(s.done)
	<-s.ended
	return s.series
}

// until waits until cond holds for the counter's counts (checked every 200ms), or timeout.
func until[T runtime.Object](c *counter[T], timeout time.Duration, cond func([]int) bool) ([]int, error) {
	var counts []int
	err := waitFor(timeout, func() (bool, error) {
		counts = c.counts()
		return cond(counts), nil
	})
	return counts, err
}

// rawSeries turns the completion times of a plain client's writes into a progress line.
func rawSeries(name string, done []time.Duration) Series {
	s := Series{Name: name, Seconds: []float64{0}, Count: []int{0}}
	sorted := append([]time.Duration(nil), done...)
	slices.Sort(sorted)
	step := max(1, len(sorted)/200)
	for i := step - 1; i < len(sorted); i += step {
		s.Seconds = append(s.Seconds, sorted[i].Seconds())
		s.Count = append(s.Count, i+1)
	}
	if n := len(sorted); n > 0 && s.Count[len(s.Count)-1] != n {
		s.Seconds = append(s.Seconds, sorted[n-1].Seconds())
		s.Count = append(s.Count, n)
	}
	return s
}

// bdWatcher caches every BundleDeployment; clusterWatcher every Cluster of fleet-default.
func bdWatcher(ctx context.Context, e *env) *watcher[*fleet.BundleDeployment] {
	return newWatcher(ctx, &fleet.BundleDeployment{}, "", e.api.BundleDeployment().List, e.api.BundleDeployment().Watch)
}

func clusterWatcher(ctx context.Context, e *env) *watcher[*fleet.Cluster] {
	return newWatcher(ctx, &fleet.Cluster{}, fleet.DefaultNamespace, e.api.Cluster().List, e.api.Cluster().Watch)
}

func registrationWatcher(ctx context.Context, e *env) *watcher[*fleet.ClusterRegistration] {
	return newWatcher(ctx, &fleet.ClusterRegistration{}, fleet.DefaultNamespace, e.api.ClusterRegistration().List, e.api.ClusterRegistration().Watch)
}
