package ui

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
)

// The local UI serves only a browser that opened the URL with the run's secret: without it, with
// a wrong one, or for another host name, nothing is shown; actions need the UI's own script.
func TestLocalUIServesOnlyTheHolderOfTheRunsSecret(t *testing.T) {
	s, err := NewStatic([]runtime.Object{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.Handler = localOnly(srv.Listener.Addr().String(), "s3cret", s.Handler())
	srv.Start()
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	noFollow := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	browser := &http.Client{Jar: jar, CheckRedirect: noFollow}
	stranger := &http.Client{CheckRedirect: noFollow}
	do := func(c *http.Client, method, path, host string, header map[string]string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("kind=GitRepo&op=pause"))
		if host != "" {
			req.Host = host
		}
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, tc := range []struct {
		name   string
		c      *http.Client
		method string
		path   string
		host   string
		header map[string]string
		want   int
	}{
		{"no secret", stranger, "GET", "/", "", nil, http.StatusForbidden},
		{"a wrong secret", stranger, "GET", "/?token=guess", "", nil, http.StatusForbidden},
		{"no secret, live updates", stranger, "GET", "/events?path=/", "", nil, http.StatusForbidden},
		{"the printed URL", browser, "GET", "/?token=s3cret", "", nil, http.StatusSeeOther},
		{"the browser that opened it", browser, "GET", "/clusters", "", nil, http.StatusOK},
		{"another host name for the same address", browser, "GET", "/", "rebound.example:80", nil, http.StatusForbidden},
		{"an action without the script's header", browser, "POST", "/actions", "", nil, http.StatusForbidden},
		{"an action the script sends", browser, "POST", "/actions", "", map[string]string{"X-Fleet-UI": "1"}, http.StatusForbidden},
	} {
		resp := do(tc.c, tc.method, tc.path, tc.host, tc.header)
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %s, want %d", tc.name, resp.Status, tc.want)
		}
		if tc.name == "the printed URL" && resp.Header.Get("Location") != "/" {
			t.Errorf("the printed URL redirects to %q, want the page without the secret", resp.Header.Get("Location"))
		}
	}
	// The action the script sends reached the server (static objects: refused there, by the
	// server, not by the guard).
	req, _ := http.NewRequest("POST", srv.URL+"/actions", strings.NewReader("kind=GitRepo&op=pause"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("X-Fleet-UI", "1")
	resp, err := browser.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "fixed objects") {
		t.Errorf("the script's action did not reach the UI: %s", body)
	}
}

// A viewer's live pages are capped: one stream past the cap is refused, and one closing makes
// room again.
func TestLiveStreamsAreCapped(t *testing.T) {
	s, err := NewStatic([]runtime.Object{})
	if err != nil {
		t.Fatal(err)
	}
	s.streams = []*slots{newSlots(1)}
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	open := func(ctx context.Context) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/events?path=/", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := open(ctx)
	if first.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %s", first.Status)
	}
	second := open(context.Background())
	second.Body.Close()
	if second.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a stream past the cap: %s", second.Status)
	}
	cancel()
	first.Body.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		third := open(context.Background())
		third.Body.Close()
		if third.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no room after the first stream closed: %s", third.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
