package config

import (
	"os"
	"path/filepath"
)

// ProxyEnvNames are the proxy settings the manager passes on, as the fleet chart's proxy and
// noProxy set them in its environment: to GitRepo Jobs and to the agents it deploys.
var ProxyEnvNames = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}

// ProxyEnv is the manager's proxy settings (name -> value; those set only).
func ProxyEnv() map[string]string {
	out := map[string]string{}
	for _, name := range ProxyEnvNames {
		if v := os.Getenv(name); v != "" {
			out[name] = v
		}
	}
	return out
}

// ProxyCAFromEnv reads the CAs of SSL_CERT_DIR, where the fleet chart puts proxyCACert for the
// controller ("" when unset or empty).
func ProxyCAFromEnv() []byte {
	var out []byte
	for _, dir := range filepath.SplitList(os.Getenv("SSL_CERT_DIR")) {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && !e.IsDir() {
				out = append(append(out, data...), '\n')
			}
		}
	}
	return out
}
