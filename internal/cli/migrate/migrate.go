// Package migrate is `fleet migrate`: one-time changes an upgrade from an older Fleet needs.
// gitrepo-helm-url-regex gives GitRepos that send Helm credentials (helmSecretName or
// helmSecretNameForPaths) but name no helmRepoURLRegex a pattern of the chart repositories their
// Bundles use, since credentials go only where that pattern matches (as on Fleet since the
// change that made it required). It runs once per installation: a ConfigMap in the system
// namespace records that it ran. (CLI)
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Names Fleet uses for this migration: the ConfigMap that says it ran, and the annotation on
// each GitRepo it gave a pattern (for an administrator to review and tighten).
const (
	HelmURLRegexDone         = "fleet-helm-url-regex-migrated"
	HelmURLRegexAutoMigrated = "fleet.cattle.io/helm-regex-auto-migrated"
	migrationDoneAnnotation  = "fleet.cattle.io/migration"
	migrationDoneNote        = "the one-time helmRepoURLRegex migration has run; delete to run it again"
)

// GitRepoHelmURLRegex runs the migration, writing a line per GitRepo it looks at to out.
func GitRepoHelmURLRegex(ctx context.Context, api fleetcontrollers.Interface, kube kubernetes.Interface, systemNamespace string, out io.Writer) error {
	cms := kube.CoreV1().ConfigMaps(systemNamespace)
	if _, err := cms.Get(ctx, HelmURLRegexDone, metav1.GetOptions{}); err == nil {
		fmt.Fprintf(out, "already done (ConfigMap %s/%s)\n", systemNamespace, HelmURLRegexDone)
		return nil
	} else if !apierrors.IsNotFound(err) {
		return err
	}
	repos, err := api.GitRepo().List("", metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing gitrepos: %w", err)
	}
	var errs []error
	for i := range repos.Items {
		gr := &repos.Items[i]
		if !needsPattern(gr) {
			continue
		}
		if err := migrateOne(api, gr, out); err != nil {
			errs = append(errs, fmt.Errorf("gitrepo %s/%s: %w", gr.Namespace, gr.Name, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err // not recorded as done: the next run tries the rest again
	}
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: HelmURLRegexDone,
		Annotations: map[string]string{migrationDoneAnnotation: migrationDoneNote}}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func needsPattern(gr *fleet.GitRepo) bool {
	return (gr.Spec.HelmSecretName != "" || gr.Spec.HelmSecretNameForPaths != "") && gr.Spec.HelmRepoURLRegex == ""
}

func migrateOne(api fleetcontrollers.Interface, gr *fleet.GitRepo, out io.Writer) error {
	bundles, err := api.Bundle().List(gr.Namespace, metav1.ListOptions{LabelSelector: labels.Set{fleet.RepoLabel: gr.Name}.String()})
	if err != nil {
		return err
	}
	pattern := Pattern(bundles.Items)
	if pattern == "" {
		fmt.Fprintf(out, "gitrepo %s/%s: no chart repository in its Bundles; helmRepoURLRegex stays empty (its Helm credentials go nowhere until it is set)\n",
			gr.Namespace, gr.Name)
		return nil
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := api.GitRepo().Get(gr.Namespace, gr.Name, metav1.GetOptions{})
		if err != nil || !needsPattern(cur) {
			return err
		}
		cur = cur.DeepCopy()
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[HelmURLRegexAutoMigrated] = "true"
		cur.Spec.HelmRepoURLRegex = pattern
		_, err = api.GitRepo().Update(cur)
		return err
	})
	if err == nil {
		fmt.Fprintf(out, "gitrepo %s/%s: helmRepoURLRegex %s (review it: it admits every path of those hosts)\n", gr.Namespace, gr.Name, pattern)
	}
	return err
}

// Pattern is the anchored pattern of the scheme and host of every chart repository the Bundles
// name (helm.repo, or an oci:// helm.chart, of each Bundle and target): "^https://a\.example/"
// or "^(https://a\.example/|oci://b\.example/)"; "" when they name none.
func Pattern(bundles []fleet.Bundle) string {
	var prefixes []string
	add := func(h *fleet.HelmOptions) {
		if h == nil {
			return
		}
		for _, raw := range []string{h.Repo, h.Chart} {
			if raw == "" || raw == h.Chart && !strings.HasPrefix(raw, "oci://") {
				continue
			}
			u, err := url.Parse(raw)
			if err != nil || u.Scheme == "" || u.Host == "" {
				continue
			}
			if p := regexp.QuoteMeta(u.Scheme + "://" + u.Host + "/"); !slices.Contains(prefixes, p) {
				prefixes = append(prefixes, p)
			}
		}
	}
	for i := range bundles {
		add(bundles[i].Spec.Helm)
		for j := range bundles[i].Spec.Targets {
			add(bundles[i].Spec.Targets[j].Helm)
		}
	}
	switch len(prefixes) {
	case 0:
		return ""
	case 1:
		return "^" + prefixes[0]
	}
	return "^(" + strings.Join(prefixes, "|") + ")"
}
