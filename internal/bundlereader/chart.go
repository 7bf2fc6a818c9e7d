package bundlereader

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/downloader"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/registry"
	"helm.sh/helm/v3/pkg/repo"
	orasauth "oras.land/oras-go/v2/registry/remote/auth"
	"sigs.k8s.io/yaml"

	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

// EmbeddedChartDir is the resource folder holding charts fetched at apply time; helm.chart is
// rewritten to point into it, so agents never download anything.
const EmbeddedChartDir = ".chart"

// ChartAuth holds credentials and TLS settings for chart repositories and OCI registries.
type ChartAuth struct {
	Username, Password string
	// CAFile is a PEM bundle of CAs to trust for chart downloads.
	CAFile string
	// InsecureSkipTLSVerify disables TLS verification for chart downloads.
	InsecureSkipTLSVerify bool
	// GitCABundle (PEM) is trusted, besides CAFile, by clones of git-hosted charts (git::):
	// a GitRepo's caBundle, which is for its git server.
	GitCABundle []byte
	// PlainHTTP talks to OCI registries over HTTP instead of HTTPS.
	PlainHTTP bool
	// URLRegex, when set, limits Username and Password to charts whose location (helm.repo,
	// or helm.chart when it is a URL) matches it; other hosts get no credentials.
	URLRegex *regexp.Regexp
	// SSHPrivateKey (PEM) authenticates clones of git-hosted charts over SSH (fleet apply
	// --ssh-privatekey-file); host keys are checked against SSH_KNOWN_HOSTS or
	// ~/.ssh/known_hosts.
	SSHPrivateKey []byte
}

// TrustCA makes downloads trust the PEM bundle ca (nothing when empty): Helm reads CAs from a
// file, so ca goes to a temporary one, which cleanup removes.
func (a *ChartAuth) TrustCA(ca []byte) (cleanup func(), err error) {
	cleanup = func() {}
	if len(ca) == 0 {
		return cleanup, nil
	}
	f, err := os.CreateTemp("", "chart-ca-")
	if err != nil {
		return cleanup, err
	}
	cleanup = func() { os.Remove(f.Name()) }
	_, err = f.Write(ca)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	a.CAFile = f.Name()
	return cleanup, err
}

// forURL is the auth to use for a chart at location: without the credentials when URLRegex is
// set and does not match it.
func (a ChartAuth) forURL(location string) ChartAuth {
	if a.URLRegex != nil && !a.URLRegex.MatchString(location) {
		a.Username, a.Password, a.SSHPrivateKey = "", "", nil
	}
	return a
}

// chartLocation is what helmRepoURLRegex is matched against: the repository, or the chart's
// own reference when no repository is named.
func chartLocation(h *fleet.HelmOptions) string {
	if h.Repo != "" {
		return h.Repo
	}
	return h.Chart
}

// embeddedChart is a packaged chart to add to the Bundle's resources.
type embeddedChart struct {
	// Name is the resource name, under EmbeddedChartDir.
	Name string
	// Data is the chart archive (.tgz).
	Data []byte
	// Version is the chart's version, resolved from any constraint.
	Version string
}

// isRemoteChart reports whether helm options name a chart outside the repository.
func isRemoteChart(h *fleet.HelmOptions) bool {
	return h != nil && (h.Repo != "" || registry.IsOCI(h.Chart) ||
		strings.HasPrefix(h.Chart, "http://") || strings.HasPrefix(h.Chart, "https://"))
}

// ociChartRef is the OCI reference of the chart h names ("" for none): helm.chart itself when
// it is one, else helm.repo when that is an oci:// reference, the chart's whole reference when
// helm.chart is empty (as Fleet takes it) and the repository under which helm.chart lies when
// not.
func ociChartRef(h *fleet.HelmOptions) string {
	switch {
	case registry.IsOCI(h.Chart):
		return h.Chart
	case !registry.IsOCI(h.Repo):
		return ""
	case h.Chart == "":
		return h.Repo
	}
	return strings.TrimSuffix(h.Repo, "/") + "/" + h.Chart
}

// fetchChart downloads the chart that h names (from a chart repository index, an OCI registry
// or a URL), resolving a version constraint, and returns it packaged.
func fetchChart(ctx context.Context, h *fleet.HelmOptions, auth ChartAuth) (*embeddedChart, error) {
	auth = auth.forURL(chartLocation(h))
	var c *embeddedChart
	err := withContext(ctx, func() (err error) {
		c, err = downloadChart(h, auth)
		return err
	})
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil, fmt.Errorf("fetching chart %q from %s: %w", h.Chart, chartLocation(h), err)
	}
	return c, err
}

// FetchChart downloads the chart h names (a Helm repository's, an OCI registry's or at a URL),
// resolving a version constraint. It returns the archive as a file named under EmbeddedChartDir
// by its content, and the version it resolved to. HelmOps use it: the manager to resolve the
// version, agents to fetch the chart.
func FetchChart(ctx context.Context, h *fleet.HelmOptions, auth ChartAuth) (File, string, error) {
	if !isRemoteChart(h) {
		return File{}, "", fmt.Errorf("helm.chart %q: name a Helm repository (helm.repo), an oci:// reference or a chart URL", h.Chart)
	}
	c, err := fetchChart(ctx, h, auth)
	if err != nil {
		return File{}, "", err
	}
	return File{Name: c.Name, Content: c.Data}, c.Version, nil
}

// withContext runs fn, returning its error, or ctx's once ctx ends first: Helm's downloads take
// no context, so a stalled server would otherwise hold the run. fn then finishes on its own (its
// requests fail once the server gives up or the temporary files are gone).
func withContext(ctx context.Context, fn func() error) error {
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func downloadChart(h *fleet.HelmOptions, auth ChartAuth) (*embeddedChart, error) {
	tmp, err := os.MkdirTemp("", "fleet-chart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	dl, getters, transport, err := chartDownloader(tmp, auth)
	if err != nil {
		return nil, err
	}
	ref, version := h.Chart, h.Version
	if oci := ociChartRef(h); oci != "" {
		ref = oci
	} else if h.Repo != "" {
		ref, err = repo.FindChartInAuthAndTLSAndPassRepoURL(h.Repo, auth.Username, auth.Password, h.Chart, h.Version,
			"", "", auth.CAFile, auth.InsecureSkipTLSVerify, false, getters)
		if err != nil {
			return nil, fmt.Errorf("helm.chart %q version %q in repository %s: %w", h.Chart, h.Version, h.Repo, err)
		}
		version = ""
		// A repository's index may place the archive on another host: the repository's
		// credentials go to the repository's host only (as Helm does since 3.6.1).
		if !sameHost(h.Repo, ref) {
			dl.Options = transport
		}
	}
	file, _, err := dl.DownloadTo(ref, version, tmp)
	if err != nil {
		return nil, fmt.Errorf("downloading helm.chart %q (version %q): %w", h.Chart, h.Version, err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	return embed(data)
}

// chartDownloader is Helm's downloader with the chart source's credentials, pointed at a private
// cache under tmp: apply never reads or writes the user's Helm configuration. It returns the
// getters and the transport options (without credentials) too.
func chartDownloader(tmp string, auth ChartAuth) (*downloader.ChartDownloader, getter.Providers, []getter.Option, error) {
	settings := cli.New()
	settings.RepositoryConfig = filepath.Join(tmp, "repositories.yaml")
	settings.RepositoryCache = filepath.Join(tmp, "cache")
	settings.RegistryConfig = filepath.Join(tmp, "registry.json")

	regClient, err := registryClient(tmp, auth)
	if err != nil {
		return nil, nil, nil, err
	}
	getters := getter.All(settings)
	transport := []getter.Option{
		getter.WithTLSClientConfig("", "", auth.CAFile),
		getter.WithInsecureSkipVerifyTLS(auth.InsecureSkipTLSVerify),
		getter.WithPlainHTTP(auth.PlainHTTP),
		getter.WithRegistryClient(regClient),
	}
	dl := downloader.ChartDownloader{
		Out:              io.Discard,
		Getters:          getters,
		RepositoryConfig: settings.RepositoryConfig,
		RepositoryCache:  settings.RepositoryCache,
		RegistryClient:   regClient,
		Options:          append([]getter.Option{getter.WithBasicAuth(auth.Username, auth.Password)}, transport...),
	}

	if err := os.MkdirAll(settings.RepositoryCache, 0o755); err != nil {
		return nil, nil, nil, err
	}
	return &dl, getters, transport, nil
}

// registryClient is Helm's OCI registry client with the chart source's credentials and no
// others. Helm's own client falls back to the host's `helm registry login`s and Docker's
// credentials (config.json and its credential helpers): a repository's fleet.yaml naming an
// oci:// chart on a registry the host (a CI runner running `fleet plan`, the manager) is logged
// in to would be pulled with them.
func registryClient(tmp string, a ChartAuth) (*registry.Client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if a.InsecureSkipTLSVerify || a.CAFile != "" {
		tlsConfig := &tls.Config{InsecureSkipVerify: a.InsecureSkipTLSVerify} //nolint:gosec // the chart source's own setting
		if a.CAFile != "" {
			pem, err := os.ReadFile(a.CAFile)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			tlsConfig.RootCAs = pool
		}
		tr.TLSClientConfig = tlsConfig
	}
	hc := &http.Client{Transport: tr}
	cred := orasauth.EmptyCredential
	if a.Username != "" || a.Password != "" {
		cred = orasauth.Credential{Username: a.Username, Password: a.Password}
	}
	authorizer := orasauth.Client{Client: hc, Credential: func(context.Context, string) (orasauth.Credential, error) { return cred, nil }}
	opts := []registry.ClientOption{registry.ClientOptWriter(io.Discard), registry.ClientOptHTTPClient(hc),
		registry.ClientOptAuthorizer(authorizer), registry.ClientOptCredentialsFile(filepath.Join(tmp, "registry.json"))}
	if a.PlainHTTP {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	return registry.NewClient(opts...)
}

// sameHost reports whether two URLs have the same scheme, host and port.
func sameHost(a, b string) bool {
	ua, err := url.Parse(a)
	if err != nil {
		return false
	}
	ub, err := url.Parse(b)
	return err == nil && ua.Scheme == ub.Scheme && ua.Host == ub.Host
}

// packageLocalChart packages the chart folder dir, which must lie inside the folder top (the
// checkout it comes from) with everything it links to and every file:// dependency it declares,
// first downloading the dependencies its Chart.yaml declares unless disabled, and returns it for
// embedding.
func packageLocalChart(ctx context.Context, top, dir string, updateDependencies bool, auth ChartAuth) (*embeddedChart, error) {
	var c *embeddedChart
	err := withContext(ctx, func() (err error) {
		c, err = packageChart(top, dir, updateDependencies, auth)
		return err
	})
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil, fmt.Errorf("fetching the dependencies of chart %s: %w", dir, err)
	}
	return c, err
}

func packageChart(top, dir string, updateDependencies bool, auth ChartAuth) (*embeddedChart, error) {
	tmp, err := os.MkdirTemp("", "fleet-localchart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	// Work on a copy: building dependencies writes into the chart's charts/ folder. The copy
	// holds no symlink, so the loader reads nothing but the checkout's own files.
	work := filepath.Join(tmp, "chart")
	if err := copyWithin(top, dir, work); err != nil {
		return nil, fmt.Errorf("copying chart %s: %w", dir, err)
	}
	c, err := loader.LoadDir(work)
	if err != nil {
		return nil, fmt.Errorf("loading chart %s: %w", dir, err)
	}
	if updateDependencies && len(c.Metadata.Dependencies) > 0 {
		restore, err := copyFileDependencies(top, dir, tmp, work, c)
		if err != nil {
			return nil, err
		}
		settings := cli.New()
		settings.RepositoryConfig = filepath.Join(tmp, "repositories.yaml")
		settings.RepositoryCache = filepath.Join(tmp, "cache")
		regClient, err := registryClient(tmp, ChartAuth{})
		if err != nil {
			return nil, err
		}
		m := downloader.Manager{
			Out:              io.Discard,
			ChartPath:        work,
			Getters:          getter.All(settings),
			RegistryClient:   regClient,
			RepositoryConfig: settings.RepositoryConfig,
			RepositoryCache:  settings.RepositoryCache,
		}
		if err := m.Update(); err != nil {
			return nil, fmt.Errorf("building dependencies of chart %s: %w", dir, err)
		}
		if c, err = loader.LoadDir(work); err != nil {
			return nil, err
		}
		restore(c)
	}
	archive, err := chartutil.Save(c, tmp)
	if err != nil {
		return nil, fmt.Errorf("packaging chart %s: %w", dir, err)
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		return nil, err
	}
	return embed(data)
}

// copyFileDependencies copies each file:// dependency of the chart c (loaded from work, a copy
// of dir) into tmp, checked as the chart itself is: inside top, by its text and through every
// symlink. Helm resolves a file:// path against the chart's folder, which for the copy is not
// the checkout's, so the copy's Chart.yaml names the copies; restore gives a chart loaded after
// the update its own repository strings back, so the package says what the checkout says.
func copyFileDependencies(top, dir, tmp, work string, c *chart.Chart) (func(*chart.Chart), error) {
	original := map[string]string{}
	changed := false
	for i, d := range c.Metadata.Dependencies {
		p, ok := strings.CutPrefix(d.Repository, "file://")
		if !ok {
			continue
		}
		src := p
		if !filepath.IsAbs(src) {
			src = filepath.Join(dir, filepath.FromSlash(p))
		}
		if _, inside := insideTop(top, src); !inside {
			return nil, fmt.Errorf("chart %s: dependency %q: %s is not a folder inside the checkout: %w", dir, d.Name, d.Repository, errOutside)
		}
		dst := filepath.Join(tmp, "deps", strconv.Itoa(i))
		if err := copyWithin(top, src, dst); err != nil {
			return nil, fmt.Errorf("chart %s: dependency %q: %w", dir, d.Name, err)
		}
		copied := "file://" + filepath.ToSlash(dst)
		original[copied] = d.Repository
		d.Repository = copied
		changed = true
	}
	restore := func(c *chart.Chart) {
		for _, deps := range [][]*chart.Dependency{c.Metadata.Dependencies, lockDependencies(c)} {
			for _, d := range deps {
				if o, ok := original[d.Repository]; ok {
					d.Repository = o
				}
			}
		}
	}
	if !changed {
		return restore, nil
	}
	data, err := yaml.Marshal(c.Metadata)
	if err != nil {
		return nil, err
	}
	return restore, os.WriteFile(filepath.Join(work, "Chart.yaml"), data, 0o600)
}

func lockDependencies(c *chart.Chart) []*chart.Dependency {
	if c.Lock == nil {
		return nil
	}
	return c.Lock.Dependencies
}

// embed names a chart archive by its content, so equal charts share a name.
func embed(data []byte) (*embeddedChart, error) {
	c, err := loader.LoadArchive(strings.NewReader(string(data)))
	if err != nil {
		return nil, fmt.Errorf("reading chart archive: %w", err)
	}
	sum := sha256.Sum256(data)
	name := path.Join(EmbeddedChartDir, hex.EncodeToString(sum[:6]), c.Metadata.Name+"-"+c.Metadata.Version+".tgz")
	return &embeddedChart{Name: name, Data: data, Version: c.Metadata.Version}, nil
}
