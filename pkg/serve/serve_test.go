package serve

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestHealthFollowsStatus(t *testing.T) {
	s := &Status{}
	h := Health(s)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	if c, _ := get("/healthz"); c != http.StatusOK {
		t.Errorf("waiting or starting: healthz %d", c)
	}
	if c, _ := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("not running yet: readyz %d", c)
	}
	s.SetReady(true)
	if c, _ := get("/readyz"); c != http.StatusOK {
		t.Errorf("running: readyz %d", c)
	}
	s.SetReady(false)
	s.SetFailed(errors.New("bootstrap: forbidden"))
	if c, body := get("/healthz"); c != http.StatusInternalServerError || !strings.Contains(body, "bootstrap: forbidden") {
		t.Errorf("failed: healthz %d %q", c, body)
	}
	if c, _ := get("/readyz"); c != http.StatusServiceUnavailable {
		t.Errorf("failed: readyz %d", c)
	}
	var none *Status
	none.SetReady(true)
	none.SetFailed(errors.New("x"))
	if none.Ready() || none.Failure() != "" {
		t.Error("a nil Status reports nothing")
	}
}
