package gitrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"time"

	"github.com/go-playground/webhooks/v6/azuredevops"
	"github.com/go-playground/webhooks/v6/bitbucket"
	bitbucketserver "github.com/go-playground/webhooks/v6/bitbucket-server"
	"github.com/go-playground/webhooks/v6/github"
	"github.com/go-playground/webhooks/v6/gitlab"
	"github.com/go-playground/webhooks/v6/gogs"
	gogsclient "github.com/gogits/go-gogs-client"
	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/logfields"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// Keys of a webhook Secret (per GitRepo: spec.webhookSecret in its namespace; else the global
// one, GlobalWebhookSecret in the system namespace).
const (
	GlobalWebhookSecret = "gitjob-webhook"
	KeyGitHub           = "github"
	KeyGitLab           = "gitlab"
	KeyBitbucket        = "bitbucket"
	KeyBitbucketServer  = "bitbucket-server"
	KeyGogs             = "gogs"
	KeyAzureUsername    = "azure-username"
	KeyAzurePassword    = "azure-password"
	maxPayload          = 10 << 20
)

// Webhook receives push notifications from git providers and records the pushed commit on the
// GitRepos of that repository and branch (or tag, for a GitRepo pinned to a revision).
type Webhook struct {
	Kube            kubernetes.Interface
	GitRepos        fleetcontrollers.GitRepoController
	SystemNamespace string
	now             func() time.Time
}

// push is what a provider's payload says was pushed.
type push struct {
	urls []string
	// ref is "refs/heads/<branch>" or "refs/tags/<tag>".
	ref, commit string
}

// errUnauthorized: the payload's signature or token does not match the secret.
var errUnauthorized = errors.New("webhook signature or token does not match")

// provider parses and verifies one provider's payloads.
type provider struct {
	name string
	// parse reads the push from r, verifying it with the secret's data when it has the keys.
	parse func(r *http.Request, secret map[string][]byte) (*push, error)
}

func detect(r *http.Request) *provider {
	h := r.Header
	switch {
	case h.Get("X-Gogs-Event") != "":
		return &provider{"gogs", parseGogs}
	case h.Get("X-GitHub-Event") != "":
		return &provider{"github", parseGitHub}
	case h.Get("X-Gitlab-Event") != "":
		return &provider{"gitlab", parseGitLab}
	case h.Get("X-Event-Key") != "" && h.Get("X-Hook-UUID") != "":
		return &provider{"bitbucket", parseBitbucket}
	case h.Get("X-Event-Key") != "":
		return &provider{"bitbucket-server", parseBitbucketServer}
	default:
		return &provider{"azure-devops", parseAzure}
	}
}

func (w *Webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(rw, "POST a push event", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPayload))
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	p := detect(r)
	log := logrus.WithFields(logrus.Fields{"controller": "gitrepo-webhook", "provider": p.name})
	// First without verification: which repository is it about?
	pushed, err := p.parse(clone(r, body), nil)
	if err != nil {
		http.Error(rw, fmt.Sprintf("%s payload: %v", p.name, err), http.StatusBadRequest)
		return
	}
	if pushed == nil {
		// A ping or an event other than a push.
		rw.WriteHeader(http.StatusOK)
		return
	}
	matched, err := w.matching(pushed)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusInternalServerError)
		return
	}
	signed, status, msg := w.verify(r, body, p, matched, log)
	if status != http.StatusOK {
		http.Error(rw, msg, status)
		return
	}
	now := time.Now()
	if w.now != nil {
		now = w.now()
	}
	for _, gr := range matched {
		commit := recordedCommit(pushed.commit, signed[gr])
		if err := w.record(gr, commit, now); err != nil {
			http.Error(rw, err.Error(), http.StatusInternalServerError)
			return
		}
		log.WithFields(logrus.Fields{logfields.Namespace: gr.Namespace, logfields.Object: gr.Name, logfields.Commit: commit}).Info("webhook: the repository is polled now")
	}
	rw.WriteHeader(http.StatusOK)
}

// matching are the GitRepos of the pushed repository, however its URL is spelt (index of
// Register), and branch.
func (w *Webhook) matching(pushed *push) ([]*fleet.GitRepo, error) {
	var matched []*fleet.GitRepo
	seen := map[string]bool{}
	for _, u := range pushed.urls {
		k := gitsource.RepoKey(u)
		if k == "" || seen[k] {
			continue
		}
		seen[k] = true
		repos, err := w.GitRepos.Cache().GetByIndex(byRepoURL, k)
		if err != nil {
			return nil, err
		}
		for _, gr := range repos {
			if matches(gr, pushed) {
				matched = append(matched, gr)
			}
		}
	}
	return matched, nil
}

// verify checks the payload with each matched GitRepo's own secret (or the global one): all must
// accept it. It returns which GitRepos had a secret, or the HTTP status and message of the
// refusal.
func (w *Webhook) verify(r *http.Request, body []byte, p *provider, matched []*fleet.GitRepo, log *logrus.Entry) (map[*fleet.GitRepo]bool, int, string) {
	signed := map[*fleet.GitRepo]bool{}
	for _, gr := range matched {
		secret, err := w.secret(r.Context(), gr)
		if err != nil {
			log.WithError(err).Warn("reading webhook secret")
			return nil, http.StatusInternalServerError, "reading the webhook secret failed"
		}
		if _, err := p.parse(clone(r, body), secret); err != nil {
			if errors.Is(err, errUnauthorized) {
				log.WithFields(logrus.Fields{logfields.Namespace: gr.Namespace, logfields.Object: gr.Name}).Warn("webhook refused: signature or token does not match")
				return nil, http.StatusUnauthorized, "signature or token does not match"
			}
			return nil, http.StatusBadRequest, err.Error()
		}
		signed[gr] = secret != nil
	}
	return signed, http.StatusOK, ""
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// recordedCommit is what a payload may show as status.webhookCommit: a full commit SHA from a
// payload verified with a secret; nothing otherwise. Either way the payload only makes the
// controller ask the remote (ls-remote) now, and the commit the branch points at is what runs.
func recordedCommit(commit string, signed bool) string {
	if signed && fullSHA.MatchString(commit) {
		return commit
	}
	return ""
}

// record notes the webhook's time (which makes the controller poll at once) and, when given,
// the commit it named.
func (w *Webhook) record(gr *fleet.GitRepo, commit string, now time.Time) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := w.GitRepos.Get(gr.Namespace, gr.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if commit != "" {
			cur.Status.WebhookCommit = commit
		}
		cur.Status.LastWebhookTime = metav1.NewTime(now)
		_, err = w.GitRepos.UpdateStatus(cur)
		return err
	})
}

// secret is the data of the GitRepo's webhook Secret, else of the global one; nil when neither
// exists (the payload is then taken unverified, as Fleet does).
func (w *Webhook) secret(ctx context.Context, gr *fleet.GitRepo) (map[string][]byte, error) {
	ns, name := gr.Namespace, gr.Spec.WebhookSecret
	if name == "" {
		ns, name = w.SystemNamespace, GlobalWebhookSecret
	}
	s, err := w.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && gr.Spec.WebhookSecret == "" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("webhook secret %s/%s: %w", ns, name, err)
	}
	return s.Data, nil
}

// matches tells whether a push is for the GitRepo's repository and branch (or pinned tag).
func matches(gr *fleet.GitRepo, p *push) bool {
	same := false
	for _, u := range p.urls {
		if u != "" && gitsource.SameRepo(u, gr.Spec.Repo) {
			same = true
		}
	}
	if !same {
		return false
	}
	if gr.Spec.Revision != "" {
		return p.ref == "refs/tags/"+gr.Spec.Revision
	}
	branch := gr.Spec.Branch
	if branch == "" {
		branch = gitsource.DefaultBranch
	}
	return p.ref == "refs/heads/"+branch
}

func clone(r *http.Request, body []byte) *http.Request {
	c := r.Clone(r.Context())
	c.Body = io.NopCloser(bytes.NewReader(body))
	return c
}

func unauthorized(err error, known ...error) error {
	for _, k := range known {
		if errors.Is(err, k) {
			return errUnauthorized
		}
	}
	return err
}

func parseGitHub(r *http.Request, secret map[string][]byte) (*push, error) {
	var opts []github.Option
	if s := secret[KeyGitHub]; len(s) > 0 {
		opts = append(opts, github.Options.Secret(string(s)))
	} else if secret != nil {
		return nil, errUnauthorized
	}
	hook, _ := github.New(opts...)
	payload, err := hook.Parse(r, github.PushEvent, github.PingEvent)
	if err != nil {
		return nil, unauthorized(err, github.ErrHMACVerificationFailed, github.ErrMissingHubSignatureHeader)
	}
	p, ok := payload.(github.PushPayload)
	if !ok {
		return nil, nil
	}
	return &push{urls: []string{p.Repository.HTMLURL, p.Repository.CloneURL, p.Repository.SSHURL, p.Repository.GitURL}, ref: p.Ref, commit: p.After}, nil
}

func parseGitLab(r *http.Request, secret map[string][]byte) (*push, error) {
	var opts []gitlab.Option
	if s := secret[KeyGitLab]; len(s) > 0 {
		opts = append(opts, gitlab.Options.Secret(string(s)))
	} else if secret != nil {
		return nil, errUnauthorized
	}
	hook, _ := gitlab.New(opts...)
	payload, err := hook.Parse(r, gitlab.PushEvents, gitlab.TagEvents)
	if err != nil {
		return nil, unauthorized(err, gitlab.ErrGitLabTokenVerificationFailed)
	}
	switch p := payload.(type) {
	case gitlab.PushEventPayload:
		return &push{urls: []string{p.Project.WebURL, p.Project.GitHTTPURL, p.Project.GitSSHURL, p.Repository.URL}, ref: p.Ref, commit: p.CheckoutSHA}, nil
	case gitlab.TagEventPayload:
		return &push{urls: []string{p.Project.WebURL, p.Project.GitHTTPURL, p.Project.GitSSHURL, p.Repository.URL}, ref: p.Ref, commit: p.CheckoutSHA}, nil
	}
	return nil, nil
}

func parseGogs(r *http.Request, secret map[string][]byte) (*push, error) {
	var opts []gogs.Option
	if s := secret[KeyGogs]; len(s) > 0 {
		opts = append(opts, gogs.Options.Secret(string(s)))
	} else if secret != nil {
		return nil, errUnauthorized
	}
	hook, _ := gogs.New(opts...)
	payload, err := hook.Parse(r, gogs.PushEvent)
	if err != nil {
		return nil, unauthorized(err, gogs.ErrHMACVerificationFailed, gogs.ErrMissingGogsSignatureHeader)
	}
	p, ok := payload.(gogsclient.PushPayload)
	if !ok || p.Repo == nil {
		return nil, nil
	}
	return &push{urls: []string{p.Repo.HTMLURL, p.Repo.CloneURL, p.Repo.SSHURL}, ref: p.Ref, commit: p.After}, nil
}

func parseBitbucket(r *http.Request, secret map[string][]byte) (*push, error) {
	var opts []bitbucket.Option
	if s := secret[KeyBitbucket]; len(s) > 0 {
		opts = append(opts, bitbucket.Options.UUID(string(s)))
	} else if secret != nil {
		return nil, errUnauthorized
	}
	hook, _ := bitbucket.New(opts...)
	payload, err := hook.Parse(r, bitbucket.RepoPushEvent)
	if err != nil {
		return nil, unauthorized(err, bitbucket.ErrUUIDVerificationFailed)
	}
	p, ok := payload.(bitbucket.RepoPushPayload)
	if !ok || len(p.Push.Changes) == 0 {
		return nil, nil
	}
	n := p.Push.Changes[0].New
	ref := "refs/heads/" + n.Name
	if n.Type == "tag" {
		ref = "refs/tags/" + n.Name
	}
	return &push{urls: []string{p.Repository.Links.HTML.Href}, ref: ref, commit: n.Target.Hash}, nil
}

func parseBitbucketServer(r *http.Request, secret map[string][]byte) (*push, error) {
	var opts []bitbucketserver.Option
	if s := secret[KeyBitbucketServer]; len(s) > 0 {
		// (The library slices the header's "sha256=" prefix off without looking.)
		if len(r.Header.Get("X-Hub-Signature")) < len("sha256=") {
			return nil, errUnauthorized
		}
		opts = append(opts, bitbucketserver.Options.Secret(string(s)))
	} else if secret != nil {
		return nil, errUnauthorized
	}
	hook, _ := bitbucketserver.New(opts...)
	payload, err := hook.Parse(r, bitbucketserver.RepositoryReferenceChangedEvent, bitbucketserver.DiagnosticsPingEvent)
	if err != nil {
		return nil, unauthorized(err, bitbucketserver.ErrHMACVerificationFailed, bitbucketserver.ErrMissingHubSignatureHeader)
	}
	p, ok := payload.(bitbucketserver.RepositoryReferenceChangedPayload)
	if !ok || len(p.Changes) == 0 {
		return nil, nil
	}
	var urls []string
	if clones, ok := p.Repository.Links["clone"].([]any); ok {
		for _, c := range clones {
			if m, ok := c.(map[string]any); ok {
				if href, ok := m["href"].(string); ok {
					urls = append(urls, href)
				}
			}
		}
	}
	return &push{urls: urls, ref: p.Changes[0].ReferenceID, commit: p.Changes[0].ToHash}, nil
}

func parseAzure(r *http.Request, secret map[string][]byte) (*push, error) {
	var opts []azuredevops.Option
	user, pass := secret[KeyAzureUsername], secret[KeyAzurePassword]
	if len(user) > 0 || len(pass) > 0 {
		opts = append(opts, azuredevops.Options.BasicAuth(string(user), string(pass)))
	} else if secret != nil {
		return nil, errUnauthorized
	}
	hook, _ := azuredevops.New(opts...)
	payload, err := hook.Parse(r, azuredevops.GitPushEventType)
	if err != nil {
		return nil, unauthorized(err, azuredevops.ErrBasicAuthVerificationFailed)
	}
	p, ok := payload.(azuredevops.GitPushEvent)
	if !ok || len(p.Resource.RefUpdates) == 0 {
		return nil, nil
	}
	return &push{urls: []string{p.Resource.Repository.RemoteURL}, ref: p.Resource.RefUpdates[0].Name, commit: p.Resource.RefUpdates[0].NewObjectID}, nil
}
