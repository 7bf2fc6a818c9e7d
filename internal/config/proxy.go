package config

import (
	"net/url"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
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

// ProxyHasCredentials says whether a proxy setting carries credentials (a user name or password
// in its URL): such settings reach Jobs and agents from a Secret, never as a plain value of a
// pod's environment, which whoever may read the pod or its Deployment reads too.
func ProxyHasCredentials(proxy map[string]string) bool {
	for _, v := range proxy {
		if u, err := url.Parse(v); err == nil && u.User != nil {
			return true
		}
		if !strings.Contains(v, "://") {
			// "user:pass@host:port" without a scheme, as some tools take it.
			if u, err := url.Parse("http://" + v); err == nil && u.User != nil {
				return true
			}
		}
	}
	return false
}

// ProxyEnvVars are the proxy settings as a pod's environment: plain values, or, when they carry
// credentials, references to the keys of the Secret secretName, whose data is the second result
// (nil when no Secret is needed). GitRepo Jobs and the agents the manager deploys both take
// them so.
func ProxyEnvVars(proxy map[string]string, secretName string) ([]corev1.EnvVar, map[string][]byte) {
	var data map[string][]byte
	if ProxyHasCredentials(proxy) {
		data = map[string][]byte{}
	}
	var env []corev1.EnvVar
	for _, name := range ProxyEnvNames {
		v := proxy[name]
		switch {
		case v == "":
		case data != nil:
			data[name] = []byte(v)
			env = append(env, corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secretName}, Key: name}}})
		default:
			env = append(env, corev1.EnvVar{Name: name, Value: v})
		}
	}
	return env, data
}

// ProxyCAFileEnv names the file holding the proxy's CA: the fleet chart sets it to where it
// mounts proxyCACert (and points SSL_CERT_DIR there too, for the controller's own connections).
// Only this file is handed on: a SSL_CERT_DIR the image or the machine sets (the system's CA
// directory) is not the proxy's CA.
const ProxyCAFileEnv = "FLEET_PROXY_CA_FILE"

// ProxyCAFromEnv reads the proxy's CA (nil when ProxyCAFileEnv is unset or names no file).
func ProxyCAFromEnv() []byte {
	name := os.Getenv(ProxyCAFileEnv)
	if name == "" {
		return nil
	}
	data, err := os.ReadFile(name)
	if err != nil || len(data) == 0 {
		return nil
	}
	return data
}
