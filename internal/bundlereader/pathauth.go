package bundlereader

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// PathCredentials is one entry of a helmSecretNameForPaths Secret's "secrets.yaml": the chart
// credentials of the bundle in one folder.
type PathCredentials struct {
	Username           string `json:"username,omitempty"`
	Password           string `json:"password,omitempty"`
	CABundle           string `json:"caBundle,omitempty"`
	SSHPrivateKey      string `json:"sshPrivateKey,omitempty"`
	InsecureSkipVerify bool   `json:"insecureSkipVerify,omitempty"`
}

// PathCredentialsKey is the key of a helmSecretNameForPaths Secret.
const PathCredentialsKey = "secrets.yaml"

// ParsePathCredentials reads a helmSecretNameForPaths document (folder → credentials) into
// per-folder ChartAuth; CA bundles are written to files under dir.
func ParsePathCredentials(data []byte, dir string) (map[string]ChartAuth, error) {
	var in map[string]PathCredentials
	if err := yaml.UnmarshalStrict(data, &in); err != nil {
		return nil, fmt.Errorf("%s: %w", PathCredentialsKey, err)
	}
	out := map[string]ChartAuth{}
	i := 0
	for path, c := range in {
		a := ChartAuth{Username: c.Username, Password: c.Password, InsecureSkipTLSVerify: c.InsecureSkipVerify}
		if c.CABundle != "" {
			i++
			f := filepath.Join(dir, fmt.Sprintf("path-ca-%d.pem", i))
			if err := os.WriteFile(f, []byte(c.CABundle), 0o600); err != nil {
				return nil, err
			}
			a.CAFile = f
		}
		out[strings.Trim(filepath.ToSlash(filepath.Clean(path)), "/")] = a
	}
	return out, nil
}
