package ui

import (
	"context"
	"reflect"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// kinds are the caches the pages read: every one watched with the viewer's credential, each on
// its own, so a kind the viewer may not list leaves the others working (and shows in a banner).
type kinds struct {
	gitRepos, helmOps, bundles, deployments, clusters, groups, rollouts *watched
	// alerts are shown on their own page; a viewer who may not read them sees why there, not
	// in every page's banner (notifications are ours, and many Fleet roles do not name them).
	alerts *watched
}

// watched is one kind's informer and the last error its list or watch met.
type watched struct {
	name     string
	informer cache.SharedIndexInformer
	mu       sync.Mutex
	err      string
}

func (w *watched) setErr(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil {
		w.err = ""
		return
	}
	w.err = err.Error()
}

// problem is why the kind cannot be shown ("" when it can).
func (w *watched) problem() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// byOwner indexes Bundles and BundleDeployments by the GitRepo or HelmOp they come from
// ("GitRepo/namespace/name", "HelmOp/namespace/name"), so a page reads its own and not all.
const byOwner = "owner"

func ownerIndex(obj any) ([]string, error) {
	var ns string
	var l map[string]string
	switch o := obj.(type) {
	case *fleet.Bundle:
		ns, l = o.Namespace, o.Labels
	case *fleet.BundleDeployment:
		ns, l = o.Labels[fleet.BundleNamespaceLabel], o.Labels
	default:
		return nil, nil
	}
	var out []string
	if r := l[fleet.RepoLabel]; r != "" {
		out = append(out, "GitRepo/"+ns+"/"+r)
	}
	if h := l[fleet.HelmNameLabel]; h != "" {
		out = append(out, "HelmOp/"+ns+"/"+h)
	}
	return out, nil
}

// owned are the cached objects of the GitRepo or HelmOp (kind/namespace/name).
func owned[T any](w *watched, key string) []T {
	objs, _ := w.informer.GetIndexer().ByIndex(byOwner, key)
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// list is every cached object of the kind.
func list[T any](w *watched) []T {
	var out []T
	for _, o := range w.informer.GetStore().List() {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

// byKey is the object namespace/name of w (a Bundle's Rollout has the Bundle's name), or the
// zero T when w holds none.
func byKey[T any](w *watched, namespace, name string) T {
	var zero T
	o, ok, _ := w.informer.GetStore().GetByKey(namespace + "/" + name)
	if !ok {
		return zero
	}
	t, _ := o.(T)
	return t
}

// newWatched starts an informer over list and watch, calling changed on every change.
func newWatched[T runtime.Object, L runtime.Object](ctx context.Context, name string, obj T,
	lf func(string, metav1.ListOptions) (L, error), wf func(string, metav1.ListOptions) (watch.Interface, error), changed func()) *watched {
	w := &watched{name: name}
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			l, err := lf("", o)
			w.setErr(err)
			return l, err
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) { return wf("", o) },
	}
	w.informer = cache.NewSharedIndexInformer(lw, obj, 10*time.Minute, cache.Indexers{byOwner: ownerIndex})
	_ = w.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) { w.setErr(err) })
	_, _ = w.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	})
	go w.informer.Run(ctx.Done())
	return w
}

func watchAll(ctx context.Context, api fleetcontrollers.Interface, changed func()) *kinds {
	return &kinds{
		gitRepos:    newWatched(ctx, "GitRepos", &fleet.GitRepo{}, api.GitRepo().List, api.GitRepo().Watch, changed),
		helmOps:     newWatched(ctx, "HelmOps", &fleet.HelmOp{}, api.HelmOp().List, api.HelmOp().Watch, changed),
		bundles:     newWatched(ctx, "Bundles", &fleet.Bundle{}, api.Bundle().List, api.Bundle().Watch, changed),
		deployments: newWatched(ctx, "BundleDeployments", &fleet.BundleDeployment{}, api.BundleDeployment().List, api.BundleDeployment().Watch, changed),
		clusters:    newWatched(ctx, "Clusters", &fleet.Cluster{}, api.Cluster().List, api.Cluster().Watch, changed),
		groups:      newWatched(ctx, "ClusterGroups", &fleet.ClusterGroup{}, api.ClusterGroup().List, api.ClusterGroup().Watch, changed),
		rollouts:    newWatched(ctx, "Rollouts", &fleet.Rollout{}, api.Rollout().List, api.Rollout().Watch, changed),
		alerts:      newWatched(ctx, "Alerts", &fleet.Alert{}, api.Alert().List, api.Alert().Watch, changed),
	}
}

func (k *kinds) all() []*watched {
	return []*watched{k.gitRepos, k.helmOps, k.bundles, k.deployments, k.clusters, k.groups, k.rollouts}
}

// problems are the banner's lines: the kinds that cannot be read and why.
func (k *kinds) problems() []string {
	var out []string
	for _, w := range k.all() {
		if p := w.problem(); p != "" {
			out = append(out, w.name+": "+p)
		}
	}
	return out
}

// static is a kind's informer over the fixed objects of obj's type among objs (NewStatic).
func static(name string, obj runtime.Object, objs []runtime.Object, list runtime.Object) *watched {
	w := &watched{name: name}
	w.informer = cache.NewSharedIndexInformer(&cache.ListWatch{
		ListFunc:  func(metav1.ListOptions) (runtime.Object, error) { return list, nil },
		WatchFunc: func(metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}, obj, 0, cache.Indexers{byOwner: ownerIndex})
	for _, o := range objs {
		if reflect.TypeOf(o) == reflect.TypeOf(obj) {
			_ = w.informer.GetIndexer().Add(o)
		}
	}
	return w
}
