// Package imagescan runs ImageScans: it asks the image's registry for its tags every interval,
// picks the newest by the scan's policy, and when that tag is not yet in the GitRepo's
// repository rewrites the fields marked with the scan's tag name and pushes a commit, which then
// deploys like any other. Off unless the manager runs with --imagescan-enabled. (manager)
package imagescan

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/template"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fleetgo/fleet/internal/controller/gitrepo"
	"github.com/fleetgo/fleet/internal/controller/retry"
	"github.com/fleetgo/fleet/internal/gitsource"
	"github.com/fleetgo/fleet/internal/imagescan"
	"github.com/fleetgo/fleet/internal/secretuse"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/fleetgo/fleet/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
)

// ConditionReady is False while the registry cannot be scanned or the commit cannot be pushed
// (the message says which and why).
const ConditionReady = "Ready"

// Intervals and defaults.
const (
	// DefaultInterval is how often an ImageScan without spec.interval scans.
	DefaultInterval = 15 * time.Minute
	// retryFirst is the wait after a failure; each further failure doubles it, up to retryMax
	// (and never past the interval).
	retryFirst = 5 * time.Second
	retryMax   = 5 * time.Minute
	// scanTimeout bounds one scan with its commit and push.
	scanTimeout = 2 * time.Minute
	// Commits without the GitRepo's imageScanCommit are written as this author, with this message.
	defaultAuthorName    = "fleet"
	defaultAuthorEmail   = "fleet@localhost"
	defaultMessageFormat = "fleet: {{.Image}} to {{.Tag}} (image scan {{.Name}})"
)

// Deps are what the controller reads and writes.
type Deps struct {
	ImageScans fleetcontrollers.ImageScanController
	GitRepos   fleetcontrollers.GitRepoCache
	// Secrets are read from their cache: registry credentials (secretRef) and git credentials.
	Secrets corecontrollers.SecretCache
	// Guard refuses the Secrets an ImageScan may not name (package secretuse).
	Guard secretuse.Guard
}

type handler struct {
	Deps
	// ctx is the controller's: its end cancels scans and pushes in flight.
	ctx context.Context
	now func() time.Time
	// retries space the scans that fail, by namespace/name.
	retries *retry.Retries
}

// Register starts running ImageScans.
func Register(ctx context.Context, d Deps) {
	h := &handler{Deps: d, ctx: ctx, now: time.Now, retries: retry.New(retryFirst, retryMax)}
	fleetcontrollers.RegisterImageScanStatusHandler(ctx, d.ImageScans, "", "imagescan", h.status)
}

// status scans when due and records what it found, committing a newer tag to the repository.
func (h *handler) status(scan *fleet.ImageScan, st fleet.ImageScanStatus) (fleet.ImageScanStatus, error) {
	key, now := scan.Namespace+"/"+scan.Name, h.now()
	if scan.DeletionTimestamp != nil || scan.Spec.Suspend {
		h.retries.Forget(key)
		return st, nil
	}
	interval := scan.Spec.Interval.Duration
	if interval <= 0 {
		interval = DefaultInterval
	}
	next := st.LastScanTime.Add(interval)
	if at, ok := h.retries.Next(key); ok {
		next = at
	}
	if st.ObservedGeneration == scan.Generation && now.Before(next) {
		h.ImageScans.EnqueueAfter(scan.Namespace, scan.Name, next.Sub(now))
		return st, nil
	}
	// The repository is cloned only when there is something to write: a tag not written yet, a
	// spec that changed, or a last attempt that failed.
	c := fleet.FindCondition(st.Conditions, ConditionReady)
	written := c != nil && c.Status == corev1.ConditionTrue && st.ObservedGeneration == scan.Generation
	previous := st.LatestTag
	st.LastScanTime, st.ObservedGeneration = metav1.NewTime(now), scan.Generation
	parent := h.ctx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithTimeout(parent, scanTimeout)
	defer cancel()
	err := h.scan(ctx, scan, &st)
	if err == nil && !(written && st.LatestTag == previous) {
		err = h.writeBack(ctx, scan, st.LatestTag)
	}
	if err != nil {
		fleet.SetCondition(&st.Conditions, ConditionReady, corev1.ConditionFalse, "Error", err.Error(), now)
		h.ImageScans.EnqueueAfter(scan.Namespace, scan.Name, h.retries.Failed(key, now, interval))
		return st, nil
	}
	h.retries.Forget(key)
	fleet.SetCondition(&st.Conditions, ConditionReady, corev1.ConditionTrue, "", "", now)
	h.ImageScans.EnqueueAfter(scan.Namespace, scan.Name, interval)
	return st, nil
}

// scan lists the repository's tags, picks the newest and records it with its digest.
func (h *handler) scan(ctx context.Context, scan *fleet.ImageScan, st *fleet.ImageScanStatus) error {
	repo, err := name.NewRepository(scan.Spec.Image)
	if err != nil {
		return fmt.Errorf("spec.image %q: %v", scan.Spec.Image, err)
	}
	auth, err := h.registryAuth(scan, repo.RegistryStr())
	if err != nil {
		return err
	}
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuth(auth)}
	tags, err := remote.List(repo, opts...)
	if err != nil {
		return fmt.Errorf("listing the tags of %s: %w", repo.Name(), err)
	}
	tag, err := imagescan.Latest(tags, scan.Spec.Policy)
	if err != nil {
		return fmt.Errorf("image %s: %w", repo.Name(), err)
	}
	desc, err := remote.Head(repo.Tag(tag), opts...)
	if err != nil {
		return fmt.Errorf("reading %s:%s: %w", repo.Name(), tag, err)
	}
	st.CanonicalImageName = repo.Name()
	st.LatestTag, st.LatestImage, st.LatestDigest = tag, scan.Spec.Image+":"+tag, desc.Digest.String()
	return nil
}

// registryAuth reads secretRef: a kubernetes.io/dockerconfigjson Secret (the entry of the
// registry) or one with username and password; anonymous without secretRef.
func (h *handler) registryAuth(scan *fleet.ImageScan, registry string) (authn.Authenticator, error) {
	ref := scan.Spec.SecretRef
	if ref == nil || ref.Name == "" {
		return authn.Anonymous, nil
	}
	s, err := h.Secrets.Get(scan.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("spec.secretRef %s: %w", ref.Name, err)
	}
	if err := h.Guard.Check(s, "spec.secretRef"); err != nil {
		return nil, err
	}
	if data, ok := s.Data[corev1.DockerConfigJsonKey]; ok {
		var cfg struct {
			Auths map[string]struct {
				Username, Password, Auth string
			} `json:"auths"`
		}
		if err := json.Unmarshal(data, &cfg); err != nil {
			return nil, fmt.Errorf("spec.secretRef %s: %s: %v", ref.Name, corev1.DockerConfigJsonKey, err)
		}
		for host, a := range cfg.Auths {
			if strings.TrimPrefix(strings.TrimPrefix(host, "https://"), "http://") != registry {
				continue
			}
			if a.Username == "" && a.Auth != "" {
				if dec, err := base64.StdEncoding.DecodeString(a.Auth); err == nil {
					a.Username, a.Password, _ = strings.Cut(string(dec), ":")
				}
			}
			return authn.FromConfig(authn.AuthConfig{Username: a.Username, Password: a.Password}), nil
		}
		return nil, fmt.Errorf("spec.secretRef %s: no credentials for registry %s", ref.Name, registry)
	}
	// A username and password go only to the registry the Secret names (key registry): the
	// ImageScan's author picks the image, and so where its credentials would be sent.
	if named := string(s.Data["registry"]); strings.TrimPrefix(strings.TrimPrefix(named, "https://"), "http://") != registry {
		return nil, fmt.Errorf("spec.secretRef %s: its username and password are for registry %q (key registry), not %s", ref.Name, named, registry)
	}
	return authn.FromConfig(authn.AuthConfig{Username: string(s.Data["username"]), Password: string(s.Data["password"])}), nil
}

// writeBack rewrites the marked fields of the GitRepo's repository to the tag and pushes a
// commit when anything changed.
func (h *handler) writeBack(ctx context.Context, scan *fleet.ImageScan, tag string) error {
	gr, err := h.GitRepos.Get(scan.Namespace, scan.Spec.GitRepoName)
	if err != nil {
		return fmt.Errorf("spec.gitrepoName %q: %w", scan.Spec.GitRepoName, err)
	}
	src, err := gitrepo.Source(gr, func(ns, name string) (*corev1.Secret, error) {
		s, err := h.Secrets.Get(ns, name)
		if err == nil {
			err = h.Guard.Check(s, "clientSecretName of gitrepo "+gr.Name)
		}
		return s, err
	})
	if err != nil {
		return fmt.Errorf("gitrepo %s: %w", gr.Name, err)
	}
	src.Revision = "" // commits go onto the branch
	dir, err := os.MkdirTemp("", "imagescan-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if _, err := gitsource.Checkout(ctx, src, dir, ""); err != nil {
		return err
	}
	tagName := scan.Spec.TagName
	if tagName == "" {
		tagName = scan.Name
	}
	changed, err := rewriteTree(dir, tagName, scan.Spec.Image, tag)
	if err != nil || !changed {
		return err
	}
	commit, err := commitOf(gr, scan, tag)
	if err != nil {
		return err
	}
	_, err = gitsource.CommitAndPush(ctx, src, dir, commit)
	return err
}

// rewriteTree rewrites the marked fields of every file of the checkout (outside .git).
func rewriteTree(dir, tagName, image, tag string) (bool, error) {
	changed := false
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || !bytes.Contains(data, []byte("$imagescan")) {
			return err
		}
		out, ok := imagescan.Rewrite(data, tagName, image, tag)
		if !ok {
			return nil
		}
		changed = true
		return os.WriteFile(path, out, 0o644)
	})
	return changed, err
}

// commitOf is the commit's author and message: the GitRepo's imageScanCommit, else defaults.
func commitOf(gr *fleet.GitRepo, scan *fleet.ImageScan, tag string) (gitsource.Commit, error) {
	c := gitsource.Commit{AuthorName: gr.Spec.ImageScanCommit.AuthorName, AuthorEmail: gr.Spec.ImageScanCommit.AuthorEmail}
	if c.AuthorName == "" {
		c.AuthorName = defaultAuthorName
	}
	if c.AuthorEmail == "" {
		c.AuthorEmail = defaultAuthorEmail
	}
	format := gr.Spec.ImageScanCommit.MessageTemplate
	if format == "" {
		format = defaultMessageFormat
	}
	t, err := template.New("message").Parse(format)
	if err != nil {
		return c, fmt.Errorf("gitrepo %s: imageScanCommit.messageTemplate: %v", gr.Name, err)
	}
	var msg bytes.Buffer
	if err := t.Execute(&msg, map[string]string{"Image": scan.Spec.Image, "Tag": tag, "Name": scan.Name}); err != nil {
		return c, fmt.Errorf("gitrepo %s: imageScanCommit.messageTemplate: %v", gr.Name, err)
	}
	c.Message = msg.String()
	return c, nil
}
