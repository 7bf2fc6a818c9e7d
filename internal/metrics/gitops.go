package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The GitOps families, labelled with the GitRepo's name and namespace.
var (
	gitRepoKey     = []string{"name", "namespace"}
	gitJobsSuccess = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_gitjobs_created_success_total",
		Help: "The number of runs started to apply a GitRepo's commit (Jobs, or in-process runs without --git-job-image)."}, gitRepoKey)
	gitJobsFailure = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_gitjobs_created_failure_total",
		Help: "The number of times starting such a run failed."}, gitRepoKey)
	gitJobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleet_gitjob_duration_seconds",
		Help:    "How long a successful run applying a GitRepo's commit took.",
		Buckets: []float64{1, 2, 5, 10, 30, 60, 180, 300, 600, 1200, 1800, 3600}}, gitRepoKey)
	fetchSuccess = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_gitrepo_fetch_latest_commit_success_total",
		Help: "The number of times the latest commit of a GitRepo's branch or revision was read."}, gitRepoKey)
	fetchFailure = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fleet_gitrepo_fetch_latest_commit_failure_total",
		Help: "The number of times reading it failed."}, gitRepoKey)
	fetchDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "fleet_gitrepo_fetch_latest_commit_duration_seconds",
		Help:    "How long reading the latest commit took, when it succeeded.",
		Buckets: []float64{.1, .2, .5, 1, 2, 5, 10, 30}}, gitRepoKey)

	gitOpsCollectors = []prometheus.Collector{gitJobsSuccess, gitJobsFailure, gitJobDuration, fetchSuccess, fetchFailure, fetchDuration}
	gitOpsNames      = []string{"fleet_gitjobs_created_success_total", "fleet_gitjobs_created_failure_total", "fleet_gitjob_duration_seconds",
		"fleet_gitrepo_fetch_latest_commit_success_total", "fleet_gitrepo_fetch_latest_commit_failure_total",
		"fleet_gitrepo_fetch_latest_commit_duration_seconds"}
)

// GitJobStarted counts a run started to apply a GitRepo's commit, or one that failed to start.
func GitJobStarted(namespace, name string, err error) {
	if err != nil {
		gitJobsFailure.WithLabelValues(name, namespace).Inc()
		return
	}
	gitJobsSuccess.WithLabelValues(name, namespace).Inc()
}

// GitJobSucceeded records how long a successful run took.
func GitJobSucceeded(namespace, name string, took time.Duration) {
	gitJobDuration.WithLabelValues(name, namespace).Observe(took.Seconds())
}

// FetchedLatestCommit records reading a GitRepo's latest commit.
func FetchedLatestCommit(namespace, name string, took time.Duration, err error) {
	if err != nil {
		fetchFailure.WithLabelValues(name, namespace).Inc()
		return
	}
	fetchSuccess.WithLabelValues(name, namespace).Inc()
	fetchDuration.WithLabelValues(name, namespace).Observe(took.Seconds())
}

// ForgetGitRepo removes a deleted GitRepo's series.
func ForgetGitRepo(namespace, name string) {
	gitJobsSuccess.DeleteLabelValues(name, namespace)
	gitJobsFailure.DeleteLabelValues(name, namespace)
	gitJobDuration.DeleteLabelValues(name, namespace)
	fetchSuccess.DeleteLabelValues(name, namespace)
	fetchFailure.DeleteLabelValues(name, namespace)
	fetchDuration.DeleteLabelValues(name, namespace)
}
