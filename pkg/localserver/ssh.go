package localserver

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// sshdBinary is Debian's OpenSSH server (package openssh-server).
const sshdBinary = "/usr/sbin/sshd"

// SSHGitServer serves the GitServer's bare repositories over SSH with Debian's sshd: a client
// logs in with ClientKey as the user running it and git runs its upload-pack there, as on any
// git host reached over SSH.
type SSHGitServer struct {
	// Root holds the bare repositories (the GitServer's Root).
	Root string
	// Port is the server's port on 127.0.0.1.
	Port int
	// User is the login name; ClientKey (PEM) and ClientPublicKey authenticate it.
	User                       string
	ClientKey, ClientPublicKey []byte
	// KnownHosts is a known_hosts line for the server's host key.
	KnownHosts []byte
	cmd        *exec.Cmd
	dir        string
}

// StartSSHGitServer starts sshd on a free port of 127.0.0.1 serving the repositories under root.
// It needs root (sshd checks the files it reads and changes to the user's identity).
func StartSSHGitServer(ctx context.Context, root string) (*SSHGitServer, error) {
	if _, err := os.Stat(sshdBinary); err != nil {
		return nil, fmt.Errorf("ssh git server: %s not found (install openssh-server): %w", sshdBinary, err)
	}
	dir, err := os.MkdirTemp("", "localserver-sshd-")
	if err != nil {
		return nil, err
	}
	s := &SSHGitServer{Root: root, dir: dir, User: currentUser()}
	fail := func(err error) (*SSHGitServer, error) {
		s.Close()
		return nil, err
	}
	for _, key := range []string{"host_key", "client_key"} {
		if out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, key)).CombinedOutput(); err != nil {
			return fail(fmt.Errorf("ssh-keygen: %v: %s", err, out))
		}
	}
	if s.ClientKey, err = os.ReadFile(filepath.Join(dir, "client_key")); err != nil {
		return fail(err)
	}
	if s.ClientPublicKey, err = os.ReadFile(filepath.Join(dir, "client_key.pub")); err != nil {
		return fail(err)
	}
	hostPub, err := os.ReadFile(filepath.Join(dir, "host_key.pub"))
	if err != nil {
		return fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), s.ClientPublicKey, 0o600); err != nil {
		return fail(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	s.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	fields := strings.Fields(string(hostPub))
	s.KnownHosts = []byte(fmt.Sprintf("[127.0.0.1]:%d %s %s\n", s.Port, fields[0], fields[1]))
	config := strings.Join([]string{
		"ListenAddress 127.0.0.1:" + strconv.Itoa(s.Port),
		"HostKey " + filepath.Join(dir, "host_key"),
		"AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"),
		"PidFile " + filepath.Join(dir, "sshd.pid"),
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PermitRootLogin prohibit-password",
		"UsePAM no",
		"StrictModes no",
		"LogLevel ERROR",
	}, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(config), 0o600); err != nil {
		return fail(err)
	}
	_ = os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	s.cmd = exec.Command(sshdBinary, "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	logFile, err := os.Create(filepath.Join(dir, "sshd.log"))
	if err != nil {
		return fail(err)
	}
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		return fail(fmt.Errorf("starting sshd: %w", err))
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port)); err == nil {
			c.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
			return fail(fmt.Errorf("sshd did not listen on port %d: %s", s.Port, log))
		}
	}
}

// RepoURL is the SSH clone URL of repository name.
func (s *SSHGitServer) RepoURL(name string) string {
	return fmt.Sprintf("ssh://%s@127.0.0.1:%d%s", s.User, s.Port, filepath.Join(s.Root, name+".git"))
}

// Close stops sshd and removes its files.
func (s *SSHGitServer) Close() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_, _ = s.cmd.Process.Wait()
	}
	_ = os.RemoveAll(s.dir)
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	if os.Geteuid() == 0 {
		return "root"
	}
	out, err := exec.Command("id", "-un").Output()
	if err != nil {
		return "root"
	}
	return strings.TrimSpace(string(out))
}
