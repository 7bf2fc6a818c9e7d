// Package downstream copies the Secrets and ConfigMaps that a BundleDeployment's
// downstreamResources name, from its Bundle's namespace into its cluster namespace, where the
// cluster's agent (which may read only that namespace) picks them up and creates them in the
// bundle's namespace downstream. Copies follow their sources and go with the BundleDeployment.
// (manager)
package downstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/fleetgo/fleet/internal/logfields"
	"github.com/fleetgo/fleet/internal/names"
	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Kinds a downstreamResources entry may name.
const (
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"
)

// CopyLabel marks a copy with the BundleDeployment it was made for.
const CopyLabel = "fleet.cattle.io/downstream-resource-of"

const bySource = "downstream-source"

func sourceKey(namespace, kind, name string) string { return namespace + "/" + kind + "/" + name }

// configMapPoll is how often the ConfigMap sources are read again: the manager caches no
// ConfigMaps outside its own namespace (Secrets it caches, so their changes are seen at once).
const configMapPoll = 30 * time.Second

type handler struct {
	ctx     context.Context
	kube    kubernetes.Interface
	secrets corecontrollers.SecretCache
	bds     fleetcontrollers.BundleDeploymentController
	guard   secretuse.Guard
	// recorder, when set, records a refused Secret on the BundleDeployment's Bundle.
	recorder record.EventRecorder
	reviews  *reviews
}

// Register starts copying. A change of a Secret source re-copies it for every BundleDeployment
// naming it, and so does a Cluster naming it as its kubeConfigSecret (the guard then refuses it
// and an earlier copy goes); ConfigMap sources are read every configMapPoll.
func Register(ctx context.Context, kube kubernetes.Interface, bds fleetcontrollers.BundleDeploymentController,
	secrets corecontrollers.SecretController, clusters fleetcontrollers.ClusterController, guard secretuse.Guard, recorder record.EventRecorder) {
	h := &handler{ctx: ctx, kube: kube, secrets: secrets.Cache(), bds: bds, guard: guard, recorder: recorder, reviews: newReviews(kube)}
	bds.Cache().AddIndexer(bySource, func(bd *fleet.BundleDeployment) ([]string, error) {
		var keys []string
		for _, r := range bd.Spec.Options.DownstreamResources {
			keys = append(keys, sourceKey(bd.Labels[fleet.BundleNamespaceLabel], r.Kind, r.Name))
		}
		if sec := helmOpSecret(bd); sec != "" {
			keys = append(keys, sourceKey(bd.Labels[fleet.BundleNamespaceLabel], KindSecret, sec))
		}
		return keys, nil
	})
	bds.OnChange(ctx, "bundledeployment-downstream", h.onChange)
	enqueue := func(ns, kind, name string) {
		users, err := bds.Cache().GetByIndex(bySource, sourceKey(ns, kind, name))
		if err != nil {
			return
		}
		for _, bd := range users {
			bds.Enqueue(bd.Namespace, bd.Name)
		}
	}
	secrets.OnChange(ctx, "downstream-source-secret", func(key string, s *corev1.Secret) (*corev1.Secret, error) {
		if s != nil {
			enqueue(s.Namespace, KindSecret, s.Name)
		}
		return s, nil
	})
	clusters.OnChange(ctx, "downstream-source-kubeconfig", func(key string, c *fleet.Cluster) (*fleet.Cluster, error) {
		if c != nil && c.Spec.KubeConfigSecret != "" {
			ns := c.Spec.KubeConfigSecretNamespace
			if ns == "" {
				ns = c.Namespace
			}
			enqueue(ns, KindSecret, c.Spec.KubeConfigSecret)
		}
		return c, nil
	})
}

// helmOpSecret is the chart source credential Secret of a HelmOp's BundleDeployment ("" for
// none): its agent fetches the chart with the copy.
func helmOpSecret(bd *fleet.BundleDeployment) string {
	if o := bd.Spec.HelmChartOptions; o != nil {
		return o.SecretName
	}
	return ""
}

func (h *handler) onChange(_ string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
	if bd == nil || bd.DeletionTimestamp != nil {
		return bd, nil
	}
	src := bd.Labels[fleet.BundleNamespaceLabel]
	owner := []metav1.OwnerReference{{APIVersion: fleet.SchemeGroupVersion.String(), Kind: "BundleDeployment", Name: bd.Name, UID: bd.UID}}
	labels := map[string]string{CopyLabel: bd.Name}
	if sec := helmOpSecret(bd); sec != "" {
		meta := metav1.ObjectMeta{Name: names.DownstreamCopy(bd.Name, sec), Namespace: bd.Namespace, Labels: labels, OwnerReferences: owner}
		// A refused Secret is not copied: the agent says the copy is missing.
		if _, err := h.copySecret(src, sec, meta, "helmSecretName", nil); err != nil && !apierrors.IsNotFound(err) && !h.refused(bd, err) {
			return bd, fmt.Errorf("copying the chart credentials %s/%s for %s/%s: %w", src, sec, bd.Namespace, bd.Name, err)
		}
	}
	if len(bd.Spec.Options.DownstreamResources) == 0 {
		return bd, nil
	}
	poll, changed := false, false
	for _, r := range bd.Spec.Options.DownstreamResources {
		poll = poll || r.Kind == KindConfigMap
		meta := metav1.ObjectMeta{Name: names.DownstreamCopy(bd.Name, r.Name), Namespace: bd.Namespace, Labels: labels, OwnerReferences: owner}
		c, err := h.copyOne(bd, src, r, meta)
		if err != nil {
			return bd, err
		}
		changed = changed || c
	}
	if changed {
		// The agent watches its BundleDeployments, not the copies: a new generation tells it
		// to deploy them (it reports the generation it deployed in status).
		patch := fmt.Sprintf(`{"spec":{"downstreamResourcesGeneration":%d}}`, bd.Spec.DownstreamResourcesGeneration+1)
		if _, err := h.bds.Patch(bd.Namespace, bd.Name, types.MergePatchType, []byte(patch)); err != nil && !apierrors.IsNotFound(err) {
			return bd, fmt.Errorf("telling %s/%s its downstream resources changed: %w", bd.Namespace, bd.Name, err)
		}
	}
	if poll {
		h.bds.EnqueueAfter(bd.Namespace, bd.Name, configMapPoll)
	}
	return bd, nil
}

// copyOne copies the downstream resource r of bd from the namespace src as meta says, and says
// whether the copy changed. A source missing or refused is not copied (the agent says which one
// it waits for), and a copy made while a rule allowed it goes once none does.
func (h *handler) copyOne(bd *fleet.BundleDeployment, src string, r fleet.DownstreamResource, meta metav1.ObjectMeta) (bool, error) {
	var err error
	var c bool
	switch r.Kind {
	case KindSecret:
		c, err = h.copySecret(src, r.Name, meta, "downstreamResources", func(s *corev1.Secret) error { return h.allowed(bd, KindSecret, s) })
	case KindConfigMap:
		c, err = h.copyConfigMap(src, r.Name, meta, func(cm *corev1.ConfigMap) error { return h.allowed(bd, KindConfigMap, cm) })
	default:
		// The agent reports the bad kind; there is nothing to copy.
		return false, nil
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if h.refused(bd, err) {
		if bd.Spec.Options.ServiceAccount != "" {
			// A right granted later is seen within reviewTTL.
			h.bds.EnqueueAfter(bd.Namespace, bd.Name, reviewTTL)
		}
		return false, h.deleteCopy(r.Kind, meta)
	}
	if err != nil {
		return false, fmt.Errorf("copying downstream %s %s/%s for %s/%s: %w", r.Kind, src, r.Name, bd.Namespace, bd.Name, err)
	}
	return c, nil
}

// deleteCopy deletes the copy of a refused Secret or ConfigMap (kind) that meta names, made
// while a rule allowed it.
func (h *handler) deleteCopy(kind string, meta metav1.ObjectMeta) error {
	var err error
	if kind == KindSecret {
		err = h.kube.CoreV1().Secrets(meta.Namespace).Delete(h.ctx, meta.Name, metav1.DeleteOptions{})
	} else {
		err = h.kube.CoreV1().ConfigMaps(meta.Namespace).Delete(h.ctx, meta.Name, metav1.DeleteOptions{})
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the copy %s/%s of a refused %s: %w", meta.Namespace, meta.Name, strings.ToLower(kind), err)
	}
	return nil
}

// refused reports whether err is the refusal of a Secret or ConfigMap (which waiting does not
// mend: it is not retried), and records it on the Bundle (reason SecretRefused or
// ConfigMapRefused).
func (h *handler) refused(bd *fleet.BundleDeployment, err error) bool {
	var r *secretuse.Refused
	if !errors.As(err, &r) {
		return false
	}
	logrus.WithFields(logfields.For("downstream", bd.Namespace, bd.Name)).Warn(err.Error())
	if h.recorder != nil {
		b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: bd.Labels[fleet.BundleNamespaceLabel], Name: bd.Labels[fleet.BundleLabel]}}
		b.SetGroupVersionKind(fleet.SchemeGroupVersion.WithKind("Bundle"))
		h.recorder.Event(b, corev1.EventTypeWarning, r.Kind+"Refused", err.Error())
	}
	return true
}

// copySecret copies the Secret ns/name as meta says, unless the guard refuses it for use or
// allowed (nil: any use the guard takes) does not allow it.
func (h *handler) copySecret(ns, name string, meta metav1.ObjectMeta, use string, allowed func(*corev1.Secret) error) (bool, error) {
	s, err := h.secrets.Get(ns, name)
	if err != nil {
		return false, err
	}
	if err := h.guard.Check(s, use); err != nil {
		return false, err
	}
	if allowed != nil {
		if err := allowed(s); err != nil {
			return false, err
		}
	}
	want := &corev1.Secret{ObjectMeta: meta, Type: s.Type, Data: s.Data}
	client := h.kube.CoreV1().Secrets(meta.Namespace)
	cur, err := h.secrets.Get(meta.Namespace, meta.Name)
	if apierrors.IsNotFound(err) {
		_, err = client.Create(h.ctx, want, metav1.CreateOptions{})
		return err == nil, err
	}
	if err != nil || (equality.Semantic.DeepEqual(cur.Data, want.Data) && cur.Type == want.Type) {
		return false, err
	}
	cur = cur.DeepCopy()
	cur.Data = want.Data
	_, err = client.Update(h.ctx, cur, metav1.UpdateOptions{})
	return err == nil, err
}

// copyConfigMap copies the ConfigMap ns/name as meta says, when allowed allows it.
func (h *handler) copyConfigMap(ns, name string, meta metav1.ObjectMeta, allowed func(*corev1.ConfigMap) error) (bool, error) {
	ctx := h.ctx
	cm, err := h.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if err := allowed(cm); err != nil {
		return false, err
	}
	want := &corev1.ConfigMap{ObjectMeta: meta, Data: cm.Data, BinaryData: cm.BinaryData}
	client := h.kube.CoreV1().ConfigMaps(meta.Namespace)
	cur, err := client.Get(ctx, meta.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.Create(h.ctx, want, metav1.CreateOptions{})
		return err == nil, err
	}
	if err != nil || (equality.Semantic.DeepEqual(cur.Data, want.Data) && equality.Semantic.DeepEqual(cur.BinaryData, want.BinaryData)) {
		return false, err
	}
	cur = cur.DeepCopy()
	cur.Data, cur.BinaryData = want.Data, want.BinaryData
	_, err = client.Update(h.ctx, cur, metav1.UpdateOptions{})
	return err == nil, err
}
