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
	if err := s.start(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Startup of the SSH git server: sshd must listen within sshdStartTimeout, looked at every
// sshdStartPoll.
const (
	sshdStartTimeout = 10 * time.Second
	sshdStartPoll    = 50 * time.Millisecond
)

// start makes the keys and configuration in s.dir, starts sshd and waits until it listens.
func (s *SSHGitServer) start(ctx context.Context) error {
	hostPub, err := s.keys(ctx)
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.Port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	fields := strings.Fields(string(hostPub))
	s.KnownHosts = []byte(fmt.Sprintf("[127.0.0.1]:%d %s %s\n", s.Port, fields[0], fields[1]))
	if err := os.WriteFile(filepath.Join(s.dir, "sshd_config"), []byte(s.sshdConfig()), 0o600); err != nil {
		return err
	}
	_ = os.MkdirAll("/run/sshd", 0o755) // privilege separation directory
	s.cmd = exec.Command(sshdBinary, "-D", "-e", "-f", filepath.Join(s.dir, "sshd_config"))
	logFile, err := os.Create(filepath.Join(s.dir, "sshd.log"))
	if err != nil {
		return err
	}
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("starting sshd: %w", err)
	}
	for deadline := time.Now().Add(sshdStartTimeout); ; time.Sleep(sshdStartPoll) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", s.Port)); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "sshd.log"))
			return fmt.Errorf("sshd did not listen on port %d: %s", s.Port, log)
		}
	}
}

// keys makes the host and client keys, authorizes the client's and returns the host's public key.
func (s *SSHGitServer) keys(ctx context.Context) ([]byte, error) {
	for _, key := range []string{"host_key", "client_key"} {
		if out, err := exec.CommandContext(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(s.dir, key)).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %v: %s", err, out)
		}
	}
	var err error
	if s.ClientKey, err = os.ReadFile(filepath.Join(s.dir, "client_key")); err != nil {
		return nil, err
	}
	if s.ClientPublicKey, err = os.ReadFile(filepath.Join(s.dir, "client_key.pub")); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "authorized_keys"), s.ClientPublicKey, 0o600); err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(s.dir, "host_key.pub"))
}

func (s *SSHGitServer) sshdConfig() string {
	return strings.Join([]string{
		"ListenAddress 127.0.0.1:" + strconv.Itoa(s.Port),
		"HostKey " + filepath.Join(s.dir, "host_key"),
		"AuthorizedKeysFile " + filepath.Join(s.dir, "authorized_keys"),
		"PidFile " + filepath.Join(s.dir, "sshd.pid"),
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"PubkeyAuthentication yes",
		"PermitRootLogin prohibit-password",
		"UsePAM no",
		"StrictModes no",
		"LogLevel ERROR",
	}, "\n") + "\n"
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
