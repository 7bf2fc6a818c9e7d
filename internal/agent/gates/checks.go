package gates

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/netguard"
	"github.com/fleetgo/fleet/internal/rollout"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// maxBody is how much of an answer a gate reads: a status code, or one Prometheus sample.
const maxBody = 1 << 20

// httpClient is the gates' client: straight to the address (no proxy from the environment),
// no redirect followed (a 3xx is the answer), and, unless allowLocal, no connection to a
// loopback, link-local, unspecified or multicast address, checked on the address dialled (so
// a name that resolves there is refused too). Answers are read up to maxBody.
func httpClient(allowLocal bool) *http.Client {
	dialer := &net.Dialer{Timeout: rollout.MaxHTTPTimeout}
	if !allowLocal {
		dialer.Control = netguard.Refuse(netguard.Local, errLocal)
	}
	return &http.Client{
		Transport: &limitedTransport{&http.Transport{Proxy: nil, DialContext: dialer.DialContext, ForceAttemptHTTP2: true,
			TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: rollout.MaxHTTPTimeout, MaxIdleConns: MaxChecksInFlight,
			IdleConnTimeout: 90 * time.Second}},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// errLocal refuses a gate's connection to a local address.
var errLocal = errors.New("a loopback or link-local address")

// limitedTransport reads at most maxBody of each answer.
type limitedTransport struct{ http.RoundTripper }

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.RoundTripper.RoundTrip(req)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, maxBody), resp.Body}
	}
	return resp, err
}

// unanswered says, of a request that got no answer, only why in words that tell nothing of what
// is there: the gate's author learns no error text of another host.
func unanswered(err error) string {
	switch {
	case errors.Is(err, errLocal):
		return "refused: a loopback or link-local address (" + AllowLocalEnv + " is not set)"
	case errors.Is(err, context.DeadlineExceeded) || os.IsTimeout(err):
		return "no answer within the timeout"
	}
	return "no answer"
}

// httpGet passes on the expected status (any 2xx by default); the status code is all it reports.
func (c *Checker) httpGet(ctx context.Context, g *fleet.HTTPGate) (outcome, string) {
	timeout := rollout.DefaultHTTPTimeout
	if g.Timeout != nil && g.Timeout.Duration > 0 {
		timeout = min(g.Timeout.Duration, rollout.MaxHTTPTimeout)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.URL, nil)
	if err != nil || req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return broken, fmt.Sprintf("httpGet.url %s: not an http(s) URL", g.URL)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return failed, fmt.Sprintf("GET %s: %s", g.URL, unanswered(err))
	}
	_, _ = io.Copy(io.Discard, resp.Body)
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

// prometheus passes when the query's one value compares with the threshold as asked; it
// reports whether it did, not the value. A Prometheus that cannot be reached or answers with an
// error fails the gate, naming prometheus.url.
func (c *Checker) prometheus(ctx context.Context, g *fleet.PrometheusGate) (outcome, string) {
	threshold, err := strconv.ParseFloat(g.Threshold, 64)
	if err != nil {
		return broken, fmt.Sprintf("prometheus.threshold %q: not a number", g.Threshold)
	}
	cmp, ok := rollout.Compare(g.Op)
	if !ok {
		return broken, fmt.Sprintf("prometheus.op %q: not a comparison", g.Op)
	}
	if u, err := url.Parse(g.URL); err != nil || u.Scheme != "http" && u.Scheme != "https" {
		return broken, fmt.Sprintf("prometheus.url %s: not an http(s) URL", g.URL)
	}
	client, err := promapi.NewClient(promapi.Config{Address: g.URL, Client: c.http})
	if err != nil {
		return broken, fmt.Sprintf("prometheus.url %s: not a URL", g.URL)
	}
	ctx, cancel := context.WithTimeout(ctx, rollout.DefaultHTTPTimeout)
	defer cancel()
	val, _, err := promv1.NewAPI(client).Query(ctx, g.Query, time.Now())
	if err != nil {
		var perr *promv1.Error
		if errors.As(err, &perr) {
			return failed, fmt.Sprintf("prometheus.url %s: query %q: answered with an error (%s)", g.URL, g.Query, perr.Type)
		}
		return failed, fmt.Sprintf("prometheus.url %s: query %q: %s", g.URL, g.Query, unanswered(err))
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
	if !cmp(v, threshold) {
		return failed, fmt.Sprintf("query %q is not %s %s", g.Query, g.Op, g.Threshold)
	}
	return passed, fmt.Sprintf("query %q is %s %s", g.Query, g.Op, g.Threshold)
}

// job passes once the gate's Job for this deployment succeeds; the agent makes it the first
// time, one per deployment ID, and Kubernetes removes it an hour after it finishes.
func (c *Checker) job(ctx context.Context, bd *fleet.BundleDeployment, g fleet.HealthGate) (outcome, string) {
	// The Job runs where the bundle deploys, as the bundle's service account: a gate's author
	// gets no namespace or identity the bundle does not have.
	ns := bd.Spec.Options.TargetNamespace
	if ns == "" {
		ns = bd.Spec.Options.DefaultNamespace
	}
	if ns == "" {
		ns = "default"
	}
	if g.Job.Namespace != "" && g.Job.Namespace != ns {
		return broken, fmt.Sprintf("job.namespace %s: a Job gate runs only in the bundle's namespace %s", g.Job.Namespace, ns)
	}
	sa := bd.Spec.Options.ServiceAccount
	if g.Job.ServiceAccountName != "" && g.Job.ServiceAccountName != sa {
		return broken, fmt.Sprintf("job.serviceAccountName %s: a Job gate runs only as the bundle's service account %q", g.Job.ServiceAccountName, sa)
	}
	name := JobName(bd.Name, g.Name, bd.Spec.DeploymentID)
	kube, err := c.clientFor(ctx, bd.Spec.Options.ServiceAccount)
	if err != nil {
		return failed, fmt.Sprintf("job %s/%s: %v", ns, name, err)
	}
	j, err := kube.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := kube.BatchV1().Jobs(ns).Create(ctx, gateJob(ns, name, sa, g), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
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

// gateJob is the gate's Job, its pod running as serviceAccount (the namespace's default when
// empty) for at most ten minutes.
func gateJob(ns, name, serviceAccount string, g fleet.HealthGate) *batchv1.Job {
	backoff, ttl, deadline := int32(0), int32(3600), int64(600)
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"fleetgo.io/rollout-gate": g.Name}},
		Spec: batchv1.JobSpec{BackoffLimit: &backoff, TTLSecondsAfterFinished: &ttl, ActiveDeadlineSeconds: &deadline,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: serviceAccount,
				Containers: []corev1.Container{{Name: "gate", Image: g.Job.Image, Command: g.Job.Command, Args: g.Job.Args}},
			}}},
	}
}
