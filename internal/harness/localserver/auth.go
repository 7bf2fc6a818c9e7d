package localserver

import (
	"crypto/subtle"
	"net/http"
)

// BasicAuth is a username and password a server requires; the zero value requires nothing.
type BasicAuth struct {
	Username, Password string
}

func (a BasicAuth) wrap(next http.Handler) http.Handler {
	if a.Username == "" && a.Password == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(u), []byte(a.Username)) != 1 ||
			subtle.ConstantTimeCompare([]byte(p), []byte(a.Password)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="localserver"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
