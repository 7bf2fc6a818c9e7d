package localcluster

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a component gets to exit after SIGTERM before it is killed.
const stopGrace = 10 * time.Second

// process is one running control-plane component with its log file.
type process struct {
	component string
	logPath   string
	cmd       *exec.Cmd
	logFile   *os.File

	done    chan struct{} // closed when the process has exited
	mu      sync.Mutex
	exitErr error
}

// startProcess starts bin with args, writing stdout and stderr to logDir/component.log.
// The child gets its own process group and is killed if this process dies, so no component
// outlives the test or tool that started it.
func startProcess(component, bin string, args []string, logDir string) (*process, error) {
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("%s: binary %s not found (build it with `make controlplane`): %w", component, bin, err)
	}
	logPath := filepath.Join(logDir, component+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: opening log file: %w", component, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: starting %s: %w (log %s)", component, bin, err, logPath)
	}
	p := &process{component: component, logPath: logPath, cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.exitErr = err
		p.mu.Unlock()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and with what.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return true, p.exitErr
	default:
		return false, nil
	}
}

// diedError describes an unexpected exit, naming the component and its log.
func (p *process) diedError() error {
	_, err := p.exited()
	if err == nil {
		err = errors.New("exit status 0")
	}
	return fmt.Errorf("%s exited unexpectedly (%v); log %s:\n%s%s", p.component, err, p.logPath, panicLine(p.logPath), tailFile(p.logPath, 20))
}

// stop sends SIGTERM to the component's process group and SIGKILL after stopGrace.
func (p *process) stop() {
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
	// Children the component may have started in its group.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
}

// panicLine returns the log's last "panic:" or "fatal error:" line and a newline, or nothing:
// a Go crash's stack trace can be longer than the tail shown.
func panicLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	i := max(bytes.LastIndex(data, []byte("\npanic: ")), bytes.LastIndex(data, []byte("\nfatal error: ")))
	if i < 0 {
		return ""
	}
	line := data[i+1:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	return string(line) + "\n...\n"
}

// tailFile returns the last n lines of a file, or a note that it cannot be read.
func tailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	const maxTail = 64 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxTail {
		_, _ = f.Seek(st.Size()-maxTail, io.SeekStart)
	}
	data, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// Process is a local process run the way control-plane components are: in its own process
// group, its output in logDir/<component>.log, killed if the process that started it dies. The
// quickstart runs the fleet controller and agents with it.
type Process struct{ p *process }

// StartProcess starts bin with args as component.
func StartProcess(component, bin string, args []string, logDir string) (*Process, error) {
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	p, err := startProcess(component, bin, args, logDir)
	if err != nil {
		return nil, err
	}
	return &Process{p: p}, nil
}

// Stop ends the process: SIGTERM, then SIGKILL after a grace period.
func (p *Process) Stop() { p.p.stop() }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.p.done }

// LogPath is the file holding the process's output.
func (p *Process) LogPath() string { return p.p.logPath }

// DiedError describes the process's exit with the last lines of its log.
func (p *Process) DiedError() error { return p.p.diedError() }

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string { return tailFile(p.p.logPath, n) }
