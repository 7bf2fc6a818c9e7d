// Package bundlebuild turns folders of a checkout into Bundles and writes them to the manager
// cluster (or as YAML), then deletes the Bundles of the same GitRepo that the run did not produce.
// The manager's GitRepo runner calls it after cloning; `fleet apply` is its command line.
package bundlebuild

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/fleetgo/fleet/internal/bundlereader"
	"github.com/fleetgo/fleet/internal/ocistorage"
	"github.com/fleetgo/fleet/internal/target"
	"github.com/fleetgo/fleet/internal/yamldoc"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Options of one run.
type Options struct {
	bundlereader.Options
	// Root is the checkout's folder; Paths are relative to it (globs allowed).
	Root  string
	Paths []string
	// TargetsFile is a YAML file with the GitRepo's targets (`targets: [...]`).
	TargetsFile string
	// Output, when set, writes the Bundles as YAML to this file ("-" for out) and needs no
	// cluster.
	Output string
	// HelmRepoURLRegex, when set, limits chart credentials (ChartAuth and ChartAuthByPath) to
	// chart locations matching it.
	HelmRepoURLRegex string
	// BundleReader, when set (fleet apply -f), holds one whole Bundle (YAML or JSON), written
	// under Name instead of reading folders; nothing is pruned.
	BundleReader io.Reader
	// ImageScans, when set, gets the ImageScans the fleet.yaml files declare (imageScans[]), and
	// those of the GitRepo no longer declared are deleted; unset, they are not written.
	ImageScans fleetcontrollers.ImageScanClient
	// Secrets, when set, keeps each Bundle's Helm values in its values Secret (spec.valuesHash),
	// as Fleet 0.13 and later do; unset (as with Output), the Bundles hold them.
	Secrets corev1client.SecretsGetter
	// OCI, when set, keeps the Bundles' contents in that registry: each manifest is pushed
	// there and the Bundle names it (spec.contentsId) instead of holding its resources.
	OCI *ocistorage.Storage
}

// TargetsFile is the content of a targets file, in Fleet's format: targets added to every
// bundle's, and restrictions added to its restrictions. The GitRepo controller writes the
// GitRepo's targets as both.
type TargetsFile struct {
	Targets            []fleet.BundleTarget            `json:"targets,omitempty"`
	TargetRestrictions []fleet.BundleTargetRestriction `json:"targetRestrictions,omitempty"`
}

// Run reads every bundle, and only if all are valid, writes them and prunes the repo's others.
// bundles is nil when Output is set.
func Run(ctx context.Context, o Options, bundles fleetcontrollers.BundleClient, out io.Writer) error {
	if o.Name == "" {
		return fmt.Errorf("a name is required: the GitRepo's name, which prefixes every bundle")
	}
	if err := o.complete(); err != nil {
		return err
	}
	if o.BundleReader != nil {
		return applyOne(ctx, o, bundles, out)
	}
	res, err := bundlereader.ReadAll(ctx, o.Root, o.Paths, o.Options)
	if err != nil {
		return err
	}
	read := res.Bundles
	sort.Slice(read, func(i, j int) bool { return read[i].Name < read[j].Name })
	if o.Output != "" {
		return writeYAML(o.Output, read, out)
	}
	if err := markOverwrites(bundles, o.Namespace, o.Name, read); err != nil {
		return err
	}
	if err := write(ctx, o, bundles, read, out); err != nil {
		return err
	}
	if err := prune(bundles, o.Namespace, o.Name, read, out); err != nil {
		return err
	}
	if o.ImageScans != nil {
		return applyImageScans(o.ImageScans, o.Namespace, o.Name, res.ImageScans, out)
	}
	return nil
}

// complete reads the targets file into the options and gives the Helm credentials the chart
// locations they are for (helmRepoURLRegex); without a regex they go nowhere (as on Fleet since
// 0.12): a repository's fleet.yaml chooses where charts come from.
func (o *Options) complete() error {
	if o.TargetsFile != "" {
		data, err := os.ReadFile(o.TargetsFile)
		if err != nil {
			return fmt.Errorf("targets file: %w", err)
		}
		var tf TargetsFile
		if err := yaml.UnmarshalStrict(data, &tf); err != nil {
			return fmt.Errorf("targets file %s: %w", o.TargetsFile, err)
		}
		o.Targets = append(o.Targets, tf.Targets...)
		o.TargetRestrictions = append(o.TargetRestrictions, tf.TargetRestrictions...)
	}
	if o.HelmRepoURLRegex == "" && hasHelmCredentials(*o) {
		logrus.WithFields(logrus.Fields{"gitrepo": o.Name, "namespace": o.Namespace}).
			Warn("helm credentials are not sent to any chart repository: helmRepoURLRegex (--helm-repo-url-regex) is empty; set it to the repositories they are for")
		o.ChartAuth.Username, o.ChartAuth.Password = "", ""
		byPath := map[string]bundlereader.ChartAuth{}
		for k, a := range o.ChartAuthByPath {
			a.Username, a.Password = "", ""
			byPath[k] = a
		}
		o.ChartAuthByPath = byPath
	}
	if o.HelmRepoURLRegex != "" {
		re, err := regexp.Compile(o.HelmRepoURLRegex)
		if err != nil {
			return fmt.Errorf("helm repo URL regex %q: %w", o.HelmRepoURLRegex, err)
		}
		o.ChartAuth.URLRegex = re
		byPath := map[string]bundlereader.ChartAuth{}
		for k, a := range o.ChartAuthByPath {
			a.URLRegex = re
			byPath[k] = a
		}
		o.ChartAuthByPath = byPath
	}
	return nil
}

// write writes the Bundles that were read, or none when one of them may not be written (it
// would take over another GitRepo's Bundle): no run is half applied. Contents go to the OCI
// registry first, so that a Bundle never names contents that are not there.
func write(ctx context.Context, o Options, bundles fleetcontrollers.BundleClient, read []*fleet.Bundle, out io.Writer) error {
	first := make([]readOnce, len(read))
	for i, b := range read {
		existing, err := bundles.Get(b.Namespace, b.Name, metav1.GetOptions{})
		switch {
		case err == nil:
			if err := claimed(existing, b); err != nil {
				return err
			}
			first[i] = readOnce{b: existing, ok: true}
		case apierrors.IsNotFound(err):
			first[i] = readOnce{ok: true}
		}
	}
	if o.OCI != nil {
		for _, b := range read {
			if err := pushContents(ctx, *o.OCI, b); err != nil {
				return fmt.Errorf("bundle %s/%s: %w", b.Namespace, b.Name, err)
			}
		}
	}
	for i, b := range read {
		if err := publish(ctx, o, bundles, b, first[i]); err != nil {
			return err
		}
		fmt.Fprintf(out, "bundle %s/%s applied\n", b.Namespace, b.Name)
	}
	return nil
}

// pushContents stores b's manifest in the registry, gzipped as a Content holds it, and makes b
// name it instead of holding its resources.
func pushContents(ctx context.Context, st ocistorage.Storage, b *fleet.Bundle) error {
	manifest, err := target.Manifest(b.Spec.Resources)
	if err != nil {
		return err
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(manifest); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	id := target.ContentName(manifest)
	if err := st.Push(ctx, id, gz.Bytes()); err != nil {
		return err
	}
	b.Spec.ContentsID, b.Spec.Resources = id, nil
	return nil
}

// hasHelmCredentials reports whether the run was given a Helm user name or password.
func hasHelmCredentials(o Options) bool {
	if o.ChartAuth.Username != "" || o.ChartAuth.Password != "" {
		return true
	}
	for _, a := range o.ChartAuthByPath {
		if a.Username != "" || a.Password != "" {
			return true
		}
	}
	return false
}

// applyImageScans writes the run's ImageScans and deletes the GitRepo's others.
func applyImageScans(client fleetcontrollers.ImageScanClient, namespace, repo string, scans []*fleet.ImageScan, out io.Writer) error {
	keep := map[string]bool{}
	for _, want := range scans {
		keep[want.Name] = true
		_, err := upsert(client.Get, client.Create, client.Update, want, func(existing *fleet.ImageScan) (*fleet.ImageScan, error) {
			updated := existing.DeepCopy()
			updated.Labels = mergeLabels(existing.Labels, want.Labels)
			updated.Spec = want.Spec
			return updated, nil
		})
		if err != nil {
			return fmt.Errorf("writing imagescan %s/%s: %w", want.Namespace, want.Name, err)
		}
	}
	list, err := client.List(namespace, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{fleet.RepoLabel: repo}).String()})
	if err != nil {
		return fmt.Errorf("listing imagescans of %s: %w", repo, err)
	}
	for _, s := range list.Items {
		if keep[s.Name] {
			continue
		}
		if err := client.Delete(namespace, s.Name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting imagescan %s/%s: %w", namespace, s.Name, err)
		}
		fmt.Fprintf(out, "imagescan %s/%s deleted: no longer in the repository\n", namespace, s.Name)
	}
	return nil
}

// applyOne writes the Bundle read from o.BundleReader under o.Name in o.Namespace, with the
// run's labels and commit.
func applyOne(ctx context.Context, o Options, bundles fleetcontrollers.BundleClient, out io.Writer) error {
	data, err := io.ReadAll(o.BundleReader)
	if err != nil {
		return fmt.Errorf("reading the bundle: %w", err)
	}
	b := &fleet.Bundle{}
	if err := yaml.UnmarshalStrict(data, b); err != nil {
		return fmt.Errorf("the bundle given is not a valid Bundle: %w", err)
	}
	if b.Kind != "" && b.Kind != "Bundle" {
		return fmt.Errorf("the bundle given is a %s, not a Bundle", b.Kind)
	}
	b.APIVersion, b.Kind = fleet.SchemeGroupVersion.String(), "Bundle"
	b.Name, b.Namespace = o.Name, o.Namespace
	b.ResourceVersion, b.UID, b.Generation, b.CreationTimestamp = "", "", 0, metav1.Time{}
	b.ManagedFields, b.Status = nil, fleet.BundleStatus{}
	b.Labels = mergeLabels(b.Labels, o.Labels)
	if o.Commit != "" {
		b.Labels[fleet.CommitLabel] = o.Commit
	}
	if o.SyncGeneration != 0 {
		b.Spec.ForceSyncGeneration = o.SyncGeneration
	}
	if o.Output != "" {
		return writeYAML(o.Output, []*fleet.Bundle{b}, out)
	}
	if err := publish(ctx, o, bundles, b, readOnce{}); err != nil {
		return err
	}
	fmt.Fprintf(out, "bundle %s/%s applied\n", b.Namespace, b.Name)
	return nil
}

func writeYAML(dest string, bundles []*fleet.Bundle, out io.Writer) error {
	var buf bytes.Buffer
	objs := make([]any, len(bundles))
	for i, b := range bundles {
		objs[i] = b
	}
	if err := yamldoc.WriteYAML(&buf, objs...); err != nil {
		return err
	}
	if dest == "-" {
		_, err := out.Write(buf.Bytes())
		return err
	}
	return os.WriteFile(dest, buf.Bytes(), 0o644)
}

// readOnce is a Bundle the run already read (ok; b nil: there was none), used for the first
// try of its write instead of reading it again.
type readOnce struct {
	b  *fleet.Bundle
	ok bool
}

// get reads the Bundle: the first time what was read before, when it was.
func (r *readOnce) get(client fleetcontrollers.BundleClient) func(ns, name string, o metav1.GetOptions) (*fleet.Bundle, error) {
	return func(ns, name string, o metav1.GetOptions) (*fleet.Bundle, error) {
		if !r.ok {
			return client.Get(ns, name, o)
		}
		r.ok = false
		if r.b == nil {
			return nil, apierrors.NewNotFound(fleet.SchemeGroupVersion.WithResource("bundles").GroupResource(), name)
		}
		return r.b.DeepCopy(), nil
	}
}

// createOrUpdate writes one Bundle, retrying when another writer changed it in between (its
// first try starts from first, when the run read it already). A Bundle something else owns is
// not written over (see owner).
func createOrUpdate(client fleetcontrollers.BundleClient, want *fleet.Bundle, first readOnce) (*fleet.Bundle, error) {
	return upsert(first.get(client), client.Create, client.Update, want, func(existing *fleet.Bundle) (*fleet.Bundle, error) {
		if err := claimed(existing, want); err != nil {
			return nil, err
		}
		updated := existing.DeepCopy()
		updated.Labels = mergeLabels(existing.Labels, want.Labels)
		updated.Spec = want.Spec
		return updated, nil
	})
}

// claimed refuses to write want over existing when existing belongs to something else.
func claimed(existing, want *fleet.Bundle) error {
	if who := owner(existing); who != "" && who != owner(want) {
		return fmt.Errorf("bundle %s/%s belongs to %s: a bundle of %s cannot take it over (fleet.yaml name: picks the Bundle's name)",
			existing.Namespace, existing.Name, who, or(owner(want), "this run"))
	}
	return nil
}

// owner says what a Bundle belongs to: a GitRepo (its repo-name label), a HelmOp (its
// fleet-helm-name label), the manager (the agent Bundles of agent management, or any Bundle
// with a controller), or "" for a Bundle written by hand.
func owner(b *fleet.Bundle) string {
	switch {
	case b.Labels[fleet.HelmNameLabel] != "":
		return "HelmOp " + b.Labels[fleet.HelmNameLabel]
	case b.Labels[fleet.ManagedLabel] == "true" || metav1.GetControllerOf(b) != nil:
		return "the fleet manager"
	case b.Labels[fleet.RepoLabel] != "":
		return "GitRepo " + b.Labels[fleet.RepoLabel]
	}
	return ""
}

func or(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// upsert creates want, or updates the object there to merged(existing), retrying conflicts;
// it returns the object written.
func upsert[T metav1.Object](get func(ns, name string, o metav1.GetOptions) (T, error), create, update func(T) (T, error),
	want T, merged func(existing T) (T, error)) (T, error) {
	var written T
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		existing, err := get(want.GetNamespace(), want.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			written, err = create(want)
			return err
		}
		if err != nil {
			return err
		}
		updated, err := merged(existing)
		if err != nil {
			return err
		}
		written, err = update(updated)
		return err
	})
	return written, err
}

func mergeLabels(existing, want map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range existing {
		out[k] = v
	}
	for k, v := range want {
		out[k] = v
	}
	return out
}

// prune deletes the Bundles labelled with this repo that the run did not produce.
func prune(client fleetcontrollers.BundleClient, namespace, repo string, keep []*fleet.Bundle, out io.Writer) error {
	sel := labels.SelectorFromSet(labels.Set{fleet.RepoLabel: repo})
	list, err := client.List(namespace, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return fmt.Errorf("listing bundles of %s: %w", repo, err)
	}
	kept := map[string]bool{}
	for _, b := range keep {
		kept[b.Name] = true
	}
	for _, b := range list.Items {
		if kept[b.Name] {
			continue
		}
		if err := client.Delete(namespace, b.Name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting bundle %s/%s: %w", namespace, b.Name, err)
		}
		fmt.Fprintf(out, "bundle %s/%s deleted: no longer in the repository\n", namespace, b.Name)
	}
	return nil
}
