package localserver

import (
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v4"
)

// GitHubAPI answers what a GitHub App's installation token request asks of GitHub's API (POST
// /app/installations/ID/access_tokens, authenticated with the App's JWT): Token, for the App
// AppID signing with the key of PublicKey and installation InstallationID. Close stops it.
type GitHubAPI struct {
	URL                   string
	AppID, InstallationID int64
	Token                 string
	// Issued counts the tokens handed out.
	Issued atomic.Int32
	srv    *httptest.Server
}

// StartGitHubAPI serves the token endpoint for the App whose key pair key belongs to.
func StartGitHubAPI(appID, installationID int64, key *rsa.PublicKey, token string) *GitHubAPI {
	g := &GitHubAPI{AppID: appID, InstallationID: installationID, Token: token}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		want := fmt.Sprintf("/app/installations/%d/access_tokens", installationID)
		if r.Method != http.MethodPost || r.URL.Path != want {
			http.NotFound(w, r)
			return
		}
		raw := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		claims := &jwt.RegisteredClaims{}
		_, err := jwt.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) {
			if _, ok := t.Method.(*jwt.SigningMethodRSA); !ok {
				return nil, fmt.Errorf("signed with %v", t.Header["alg"])
			}
			return key, nil
		})
		if err != nil || claims.Issuer != strconv.FormatInt(appID, 10) {
			http.Error(w, `{"message":"A JSON web token could not be decoded"}`, http.StatusUnauthorized)
			return
		}
		g.Issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"token": token, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
	}))
	g.URL = g.srv.URL
	return g
}

// Close stops the server.
func (g *GitHubAPI) Close() { g.srv.Close() }
