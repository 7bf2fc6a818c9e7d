package plan

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/bundlebuild"
	"github.com/fleetgo/fleet/internal/bundlereader"
	clitarget "github.com/fleetgo/fleet/internal/cli/target"
	"github.com/fleetgo/fleet/internal/manifestdiff"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Request is what a plan is asked for (fleet plan's flags).
type Request struct {
	// Repo is the git checkout; Base and Head its revisions (Head "" for the working tree).
	Repo, Base, Head string
	// Name prefixes bundle names ("" for the checkout folder's name); Namespace holds the
	// GitRepo and its clusters.
	Name, Namespace string
	// GitRepo, when set, names the GitRepo on the manager whose name, paths, targets and options
	// the checkout is read with.
	GitRepo string
	// TargetsFile holds targets (a GitRepo's, as fleet apply takes them); ClustersFile the
	// Clusters and ClusterGroups to plan against instead of the manager's.
	TargetsFile, ClustersFile string
	// Live compares head with what the clusters hold now.
	Live bool
	// Paths are the folders to read (the GitRepo's when empty and GitRepo is set).
	Paths []string
}

// Prepare reads both revisions and the clusters a request plans with (api and kube: the
// manager's, read-only; nil when the request needs neither).
func Prepare(ctx context.Context, q Request, api fleetcontrollers.Interface, kube kubernetes.Interface) (Input, error) {
	o, paths, err := q.readOptions(api)
	if err != nil {
		return Input{}, err
	}
	in := Input{Redact: manifestdiff.NewRedactor()}
	head, err := Open(q.Repo, q.Head)
	if err != nil {
		return in, err
	}
	defer head.Close()
	if in.Head, err = Read(head, paths, o); err != nil {
		return in, fmt.Errorf("head: %w", err)
	}
	if q.Base != "" {
		base, err := Open(q.Repo, q.Base)
		if err != nil {
			return in, err
		}
		defer base.Close()
		if in.Base, err = Read(base, paths, o); err != nil {
			return in, fmt.Errorf("base: %w", err)
		}
	}
	if in.Targeting, err = q.clusters(ctx, api, kube); err != nil {
		return in, err
	}
	if q.Live {
		var names []string
		for _, s := range []Side{in.Base, in.Head} {
			for _, b := range s.Bundles {
				names = append(names, b.Name)
			}
		}
		if in.Live, err = Live(ctx, api, kube.CoreV1(), q.Namespace, o.Name, names); err != nil {
			return in, err
		}
	}
	return in, nil
}

// readOptions are how the checkout is read: a GitRepo's options, or the request's.
func (q Request) readOptions(api fleetcontrollers.Interface) (bundlereader.Options, []string, error) {
	paths := q.Paths
	if q.GitRepo != "" {
		gr, err := api.GitRepo().Get(q.Namespace, q.GitRepo, metav1.GetOptions{})
		if err != nil {
			return bundlereader.Options{}, nil, err
		}
		o := bundlebuild.FromGitRepo(gr, "")
		if len(paths) > 0 {
			o.Paths = paths
		}
		return o.Options, o.Paths, nil
	}
	name := q.Name
	if name == "" {
		abs, err := filepath.Abs(q.Repo)
		if err != nil {
			return bundlereader.Options{}, nil, err
		}
		name = filepath.Base(abs)
	}
	o := bundlereader.Options{Name: name, Namespace: q.Namespace}
	if q.TargetsFile != "" {
		data, err := os.ReadFile(q.TargetsFile)
		if err != nil {
			return o, nil, err
		}
		var tf bundlebuild.TargetsFile
		if err := yaml.UnmarshalStrict(data, &tf); err != nil {
			return o, nil, fmt.Errorf("targets file %s: %w", q.TargetsFile, err)
		}
		o.Targets, o.TargetRestrictions = tf.Targets, tf.TargetRestrictions
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	return o, paths, nil
}

// clusters reads the clusters to plan against: the file's, or the manager's (read-only).
func (q Request) clusters(ctx context.Context, api fleetcontrollers.Interface, kube kubernetes.Interface) (clitarget.Input, error) {
	if q.ClustersFile == "" {
		return Clusters(ctx, api, kube, q.Namespace)
	}
	var ti clitarget.Input
	err := clitarget.ReadObjects(q.ClustersFile, &ti)
	return ti, err
}
