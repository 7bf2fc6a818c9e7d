package bundlereader

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetgo/fleet/internal/harness/localserver"
	fleet "github.com/fleetgo/fleet/pkg/apis/fleet.cattle.io/v1alpha1"
)

func stalledServer(t *testing.T) string {
	t.Helper()
	s, err := localserver.StartStalledServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s.URL
}

// A chart server that never answers holds a read no longer than its context, and the error
// names the chart and the server.
func TestStalledChartServerEndsWithTheContext(t *testing.T) {
	url := stalledServer(t)
	for _, h := range []fleet.HelmOptions{
		{Repo: url, Chart: "app", Version: "1.0.0"},
		{Chart: url + "/app-1.0.0.tgz"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		start := time.Now()
		_, err := fetchChart(ctx, &h, ChartAuth{})
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), `"`+h.Chart+`"`) {
			t.Errorf("%+v: err = %v", h, err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("%+v: returned after %s", h, d)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := fetchGitChart(ctx, "git::"+url+"/charts.git//app?ref=main", false, ChartAuth{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("git chart: err = %v", err)
	}
}
