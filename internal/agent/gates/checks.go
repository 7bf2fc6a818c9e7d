package gates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/rollout"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// httpGet passes on the expected status (any 2xx by default).
func (c *Checker) httpGet(ctx context.Context, g *fleet.HTTPGate) (outcome, string) {
	timeout := rollout.DefaultHTTPTimeout
	if g.Timeout != nil && g.Timeout.Duration > 0 {
		timeout = g.Timeout.Duration
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL, nil)
	if err != nil {
		return broken, fmt.Sprintf("httpGet.url %s: %v", g.URL, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return failed, fmt.Sprintf("GET %s: %v", g.URL, err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if g.ExpectStatus != 0 {
		ok = resp.StatusCode == g.ExpectStatus
	}
	if !ok {
		return failed, fmt.Sprintf("GET %s: status %d", g.URL, resp.StatusCode)
	}
	return passed, fmt.Sprintf("GET %s: status %d", g.URL, resp.StatusCode)
}

// prometheus passes when the query's one value compares with the threshold as asked. A
// Prometheus that cannot be reached fails the gate, naming the URL.
func (c *Checker) prometheus(ctx context.Context, g *fleet.PrometheusGate) (outcome, string) {
	threshold, err := strconv.ParseFloat(g.Threshold, 64)
	if err != nil {
		return broken, fmt.Sprintf("prometheus.threshold %q: not a number", g.Threshold)
	}
	cmp, ok := rollout.Compare(g.Op)
	if !ok {
		return broken, fmt.Sprintf("prometheus.op %q: not a comparison", g.Op)
	}
	client, err := promapi.NewClient(promapi.Config{Address: g.URL, Client: c.http})
	if err != nil {
		return broken, fmt.Sprintf("prometheus.url %s: %v", g.URL, err)
	}
	ctx, cancel := context.WithTimeout(ctx, rollout.DefaultHTTPTimeout)
	defer cancel()
	val, _, err := promv1.NewAPI(client).Query(ctx, g.Query, time.Now())
	if err != nil {
		return failed, fmt.Sprintf("prometheus.url %s: query %q: %v", g.URL, g.Query, err)
	}
	var v float64
	switch r := val.(type) {
	case model.Vector:
		if len(r) == 0 {
			return failed, fmt.Sprintf("query %q returned no samples", g.Query)
		}
		v = float64(r[0].Value)
	case *model.Scalar:
		v = float64(r.Value)
	default:
		return broken, fmt.Sprintf("query %q returned a %s, not one sample", g.Query, val.Type())
	}
	msg := fmt.Sprintf("query %q = %g, wanted %s %s", g.Query, v, g.Op, g.Threshold)
	if !cmp(v, threshold) {
		return failed, msg
	}
	return passed, msg
}

// job passes once the gate's Job for this deployment succeeds; the agent makes it the first
// time, one per deployment ID, and Kubernetes removes it an hour after it finishes.
func (c *Checker) job(ctx context.Context, bd *fleet.BundleDeployment, g fleet.HealthGate) (outcome, string) {
	ns := g.Job.Namespace
	if ns == "" {
		ns = bd.Spec.Options.TargetNamespace
	}
	if ns == "" {
		ns = bd.Spec.Options.DefaultNamespace
	}
	if ns == "" {
		ns = "default"
	}
	name := JobName(bd.Name, g.Name, bd.Spec.DeploymentID)
	kube, err := c.clientFor(ctx, bd.Spec.Options.ServiceAccount)
	if err != nil {
		return failed, fmt.Sprintf("job %s/%s: %v", ns, name, err)
	}
	j, err := kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := kube.BatchV1().Jobs(ns).Create(ctx, gateJob(ns, name, g), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return failed, fmt.Sprintf("creating job %s/%s: %v", ns, name, err)
		}
		return pending, fmt.Sprintf("job %s/%s started", ns, name)
	}
	if err != nil {
		return failed, fmt.Sprintf("job %s/%s: %v", ns, name, err)
	}
	if j.Status.Succeeded > 0 {
		return passed, fmt.Sprintf("job %s/%s succeeded", ns, name)
	}
	for _, cond := range j.Status.Conditions {
		if cond.Type == batchv1.JobFailed && cond.Status == corev1.ConditionTrue {
			return broken, fmt.Sprintf("job %s/%s failed: %s %s", ns, name, cond.Reason, cond.Message)
		}
	}
	return pending, fmt.Sprintf("job %s/%s running", ns, name)
}

// JobName is the Job of a gate for one deployment: at most 63 characters.
func JobName(bundleDeployment, gate, deploymentID string) string {
	sum := sha256.Sum256([]byte(bundleDeployment + "/" + gate + "/" + deploymentID))
	prefix := bundleDeployment + "-" + gate
	if len(prefix) > 48 {
		prefix = prefix[:48]
	}
	return prefix + "-" + hex.EncodeToString(sum[:])[:8]
}

func gateJob(ns, name string, g fleet.HealthGate) *batchv1.Job {
	backoff, ttl := int32(0), int32(3600)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"fleetgo.io/rollout-gate": g.Name}},
		Spec: batchv1.JobSpec{BackoffLimit: &backoff, TTLSecondsAfterFinished: &ttl,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: g.Job.ServiceAccountName,
				Containers: []corev1.Container{{Name: "gate", Image: g.Job.Image, Command: g.Job.Command, Args: g.Job.Args}},
			}}},
	}
}
