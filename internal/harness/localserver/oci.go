package localserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// registryBinary is Debian's package docker-registry (the CNCF distribution registry).
const registryBinary = "docker-registry"

// OCIRegistry is a running OCI registry on loopback, speaking plain HTTP.
type OCIRegistry struct {
	// Host is host:port, as used in oci://HOST/repo/chart references.
	Host string
	// LogPath is the registry's log file.
	LogPath string
	cmd     *exec.Cmd
	done    chan struct{}
}

// StartOCIRegistry runs docker-registry on loopback with its storage under dir, requiring auth
// when set.
func StartOCIRegistry(ctx context.Context, dir string, auth BasicAuth) (*OCIRegistry, error) {
	return StartOCIRegistryOn(ctx, dir, auth, "127.0.0.1")
}

// StartOCIRegistryOn is StartOCIRegistry listening on address ip ("0.0.0.0" for every address,
// so network namespaces reach it at their host address); Host stays on loopback.
func StartOCIRegistryOn(ctx context.Context, dir string, auth BasicAuth, ip string) (*OCIRegistry, error) {
	bin, err := exec.LookPath(registryBinary)
	if err != nil {
		return nil, fmt.Errorf("OCI registry: %s not found (apt-get install docker-registry): %w", registryBinary, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "storage"), 0o755); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	listen, host := net.JoinHostPort(ip, port), net.JoinHostPort("127.0.0.1", port)
	l.Close()

	cfg := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: %s\n  delete:\n    enabled: true\nhttp:\n  addr: %q\n",
		filepath.Join(dir, "storage"), listen)
	if auth.Username != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(auth.Password), bcrypt.DefaultCost)
		if err != nil {
			return nil, err
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(htpasswd, []byte(auth.Username+":"+string(hash)+"\n"), 0o600); err != nil {
			return nil, err
		}
		cfg += fmt.Sprintf("auth:\n  htpasswd:\n    realm: localserver\n    path: %s\n", htpasswd)
	}
	cfgPath := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "registry.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", cfgPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	r := &OCIRegistry{Host: host, LogPath: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); logFile.Close(); close(r.done) }()

	deadline := time.Now().Add(30 * time.Second)
	for !statusOK("http://" + host + "/v2/") {
		select {
		case <-r.done:
			data, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("OCI registry exited at start; log %s:\n%s", logPath, data)
		case <-ctx.Done():
			r.Close()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.Close()
			return nil, fmt.Errorf("OCI registry did not answer on %s within 30s; log %s", host, logPath)
		}
	}
	return r, nil
}

// Close stops the registry.
func (r *OCIRegistry) Close() {
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
}
