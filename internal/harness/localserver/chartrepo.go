package localserver

import (
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/repo"
)

// ChartRepo is a Helm chart repository: index.yaml and packaged charts over HTTP.
type ChartRepo struct {
	// Dir holds index.yaml and the .tgz files.
	Dir string
	// URL is the repository URL users put in helm.repo.
	URL string
	srv *httptest.Server
	mu  sync.Mutex
}

// StartChartRepo serves an empty chart repository from dir (created if missing), requiring
// auth when it is set. Add charts with AddChart; stop it with Close.
func StartChartRepo(dir string, auth BasicAuth) (*ChartRepo, error) {
	return StartChartRepoOn(dir, auth, nil)
}

// StartChartRepoOn is StartChartRepo listening on ip (loopback when nil).
func StartChartRepoOn(dir string, auth BasicAuth, ip net.IP) (*ChartRepo, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	srv, err := serveOn(auth.wrap(http.FileServer(http.Dir(dir))), ip)
	if err != nil {
		return nil, err
	}
	r := &ChartRepo{Dir: dir, URL: srv.URL, srv: srv}
	if err := r.reindex(); err != nil {
		srv.Close()
		return nil, err
	}
	return r, nil
}

// StartTLSChartRepo is StartChartRepo over HTTPS with a certificate of its own CA: CA is that
// CA, in PEM, for clients to trust.
func StartTLSChartRepo(dir string, auth BasicAuth) (repo *ChartRepo, ca []byte, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, err
	}
	srv := httptest.NewTLSServer(auth.wrap(http.FileServer(http.Dir(dir))))
	r := &ChartRepo{Dir: dir, URL: srv.URL, srv: srv}
	if err := r.reindex(); err != nil {
		srv.Close()
		return nil, nil, err
	}
	ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	return r, ca, nil
}

// Close stops the server.
func (r *ChartRepo) Close() { r.srv.Close() }

// AddChart packages the chart in chartDir (as `helm package` does) into the repository and
// rewrites index.yaml. It returns the package's file name.
func (r *ChartRepo) AddChart(chartDir string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := loader.LoadDir(chartDir)
	if err != nil {
		return "", fmt.Errorf("loading chart %s: %w", chartDir, err)
	}
	path, err := chartutil.Save(c, r.Dir)
	if err != nil {
		return "", fmt.Errorf("packaging chart %s: %w", chartDir, err)
	}
	if err := r.reindex(); err != nil {
		return "", err
	}
	return filepath.Base(path), nil
}

func (r *ChartRepo) reindex() error {
	idx, err := repo.IndexDirectory(r.Dir, r.URL)
	if err != nil {
		return fmt.Errorf("indexing %s: %w", r.Dir, err)
	}
	idx.SortEntries()
	return idx.WriteFile(filepath.Join(r.Dir, "index.yaml"), 0o644)
}
