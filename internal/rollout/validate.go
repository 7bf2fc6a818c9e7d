// Package rollout decides progressive rollouts: which stage each targeted cluster belongs to,
// where each cluster stands (updated, passing its gates, failed), and, pass by pass, which
// clusters the manager promotes to the new revision, holds, or rolls back, with the Rollout's
// new status. It reads only its arguments; the bundle controller applies its decisions.
package rollout

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Defaults of a policy's optional fields.
const (
	DefaultProgressDeadline = 10 * time.Minute
	DefaultGateInterval     = 10 * time.Second
	DefaultFailureThreshold = 3
	DefaultHTTPTimeout      = 5 * time.Second
)

// Bounds of what a policy may ask of the agents that run its gates: a policy is its tenant's,
// and the agents hold the gates to the same bounds whatever the manager let through.
const (
	MaxGates            = 16
	MinGateInterval     = 1 * time.Second
	MaxGateInterval     = 10 * time.Minute
	MaxHTTPTimeout      = 30 * time.Second
	MaxFailureThreshold = 100
)

// Validate checks a policy, naming the field of the first problem of each kind it finds.
func Validate(p *fleet.RolloutPolicySpec) error {
	var errs []error
	if len(p.Stages) == 0 {
		errs = append(errs, errors.New("stages: at least one stage is needed"))
	}
	names := map[string]int{}
	for i, s := range p.Stages {
		errs = append(errs, validateStage(p, i, s, names)...)
	}
	if len(p.Gates) > MaxGates {
		errs = append(errs, fmt.Errorf("gates: %d gates, at most %d", len(p.Gates), MaxGates))
	}
	gateNames := map[string]bool{}
	for i, g := range p.Gates {
		if err := validateGate(g); err != nil {
			errs = append(errs, fmt.Errorf("gates[%d]: %w", i, err))
		}
		if gateNames[g.Name] {
			errs = append(errs, fmt.Errorf("gates[%d].name: %q is used twice", i, g.Name))
		}
		gateNames[g.Name] = true
	}
	switch p.OnFailure {
	case "", fleet.OnFailureRollback, fleet.OnFailurePause:
	default:
		errs = append(errs, fmt.Errorf("onFailure: %q is neither Rollback nor Pause", p.OnFailure))
	}
	if p.ProgressDeadline != nil && p.ProgressDeadline.Duration <= 0 {
		errs = append(errs, errors.New("progressDeadline: must be positive"))
	}
	return errors.Join(errs...)
}

func validateStage(p *fleet.RolloutPolicySpec, i int, s fleet.RolloutStage, names map[string]int) []error {
	var errs []error
	field := fmt.Sprintf("stages[%d]", i)
	if s.Name == "" {
		errs = append(errs, fmt.Errorf("%s.name: a stage needs a name", field))
	} else if j, dup := names[s.Name]; dup {
		errs = append(errs, fmt.Errorf("%s.name: %q is already stages[%d]'s", field, s.Name, j))
	}
	names[s.Name] = i
	if s.Percent != nil && (*s.Percent < 1 || *s.Percent > 100) {
		errs = append(errs, fmt.Errorf("%s.percent: %d is not within 1-100", field, *s.Percent))
	}
	if s.FailureBudget < 0 {
		errs = append(errs, fmt.Errorf("%s.failureBudget: must not be negative", field))
	}
	if s.Soak != nil && s.Soak.Duration < 0 {
		errs = append(errs, fmt.Errorf("%s.soak: must not be negative", field))
	}
	// Approving a stage means judging the one before it: that takes a soak to judge.
	if s.RequireApproval && i > 0 && soakOf(p.Stages[i-1]) == 0 {
		errs = append(errs, fmt.Errorf("%s.requireApproval: stages[%d] (%s) has no soak, so there is nothing to judge before approving", field, i-1, p.Stages[i-1].Name))
	}
	return errs
}

func validateGate(g fleet.HealthGate) error {
	if g.Name == "" {
		return errors.New("name: a gate needs a name")
	}
	if errs := validation.IsDNS1123Label(g.Name); len(errs) > 0 {
		return fmt.Errorf("name: %q: %s", g.Name, errs[0])
	}
	kinds := 0
	for _, set := range []bool{g.HTTPGet != nil, g.Job != nil, g.Prometheus != nil} {
		if set {
			kinds++
		}
	}
	if kinds != 1 {
		return fmt.Errorf("%s: exactly one of httpGet, job and prometheus must be set", g.Name)
	}
	switch {
	case g.HTTPGet != nil:
		if u, err := url.Parse(g.HTTPGet.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("httpGet.url: %q is not an http(s) URL", g.HTTPGet.URL)
		}
	case g.Job != nil:
		if g.Job.Image == "" {
			return errors.New("job.image: a Job gate needs an image")
		}
	case g.Prometheus != nil:
		pg := g.Prometheus
		if u, err := url.Parse(pg.URL); err != nil || u.Host == "" {
			return fmt.Errorf("prometheus.url: %q is not a URL", pg.URL)
		}
		if pg.Query == "" {
			return errors.New("prometheus.query: empty")
		}
		if _, err := strconv.ParseFloat(pg.Threshold, 64); err != nil {
			return fmt.Errorf("prometheus.threshold: %q is not a number", pg.Threshold)
		}
		if _, ok := Compare(pg.Op); !ok {
			return fmt.Errorf("prometheus.op: %q is not one of <, <=, >, >=, ==, !=", pg.Op)
		}
	}
	if g.FailureThreshold < 0 || g.FailureThreshold > MaxFailureThreshold {
		return fmt.Errorf("failureThreshold: %d is not within 0-%d", g.FailureThreshold, MaxFailureThreshold)
	}
	if g.Interval != nil && (g.Interval.Duration < MinGateInterval || g.Interval.Duration > MaxGateInterval) {
		return fmt.Errorf("interval: %s is not within %s-%s", g.Interval.Duration, MinGateInterval, MaxGateInterval)
	}
	if g.HTTPGet != nil && g.HTTPGet.Timeout != nil && (g.HTTPGet.Timeout.Duration <= 0 || g.HTTPGet.Timeout.Duration > MaxHTTPTimeout) {
		return fmt.Errorf("httpGet.timeout: %s is not within 0-%s", g.HTTPGet.Timeout.Duration, MaxHTTPTimeout)
	}
	return nil
}

// Compare returns the comparison an op names.
func Compare(op string) (func(v, threshold float64) bool, bool) {
	ops := map[string]func(v, t float64) bool{
		"<": func(v, t float64) bool { return v < t }, "<=": func(v, t float64) bool { return v <= t },
		">": func(v, t float64) bool { return v > t }, ">=": func(v, t float64) bool { return v >= t },
		"==": func(v, t float64) bool { return v == t }, "!=": func(v, t float64) bool { return v != t },
	}
	f, ok := ops[op]
	return f, ok
}

func soakOf(s fleet.RolloutStage) time.Duration {
	if s.Soak == nil {
		return 0
	}
	return s.Soak.Duration
}

func deadlineOf(p *fleet.RolloutPolicySpec) time.Duration {
	if p.ProgressDeadline == nil {
		return DefaultProgressDeadline
	}
	return p.ProgressDeadline.Duration
}
