// Package localserver runs the real servers that Fleet talks to, on loopback: a git server
// (git http-backend behind net/http/cgi), a Helm chart repository (index.yaml and packaged charts
// over HTTP) and an OCI registry (Debian's docker-registry). Integration tests, the e2e suite
// and the quickstart use them; every server can require basic auth.
package localserver
