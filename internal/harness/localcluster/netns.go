package localcluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// NetNS is a network namespace joined to the host by a veth pair: what runs inside reaches the
// host at HostIP, and nothing outside reaches what listens inside on its loopback, as for a
// cluster behind NAT. Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
type NetNS struct {
	Name string
	// HostIP is the host's end of the veth pair, NSIP the namespace's.
	HostIP, NSIP net.IP
	hostLink     string
}

// NewNetNS creates the namespace name with a /30 link: the host gets 10.211.<n>.1 and the
// namespace 10.211.<n>.2.
func NewNetNS(name string, n int) (*NetNS, error) {
	ns := &NetNS{Name: name, HostIP: net.IPv4(10, 211, byte(n), 1), NSIP: net.IPv4(10, 211, byte(n), 2),
		hostLink: fmt.Sprintf("vfh%d", n)}
	peer := fmt.Sprintf("vfn%d", n)
	steps := [][]string{
		{"netns", "add", name},
		{"link", "add", ns.hostLink, "type", "veth", "peer", "name", peer},
		{"link", "set", peer, "netns", name},
		{"addr", "add", ns.HostIP.String() + "/30", "dev", ns.hostLink},
		{"link", "set", ns.hostLink, "up"},
		{"netns", "exec", name, "ip", "addr", "add", ns.NSIP.String() + "/30", "dev", peer},
		{"netns", "exec", name, "ip", "link", "set", peer, "up"},
		{"netns", "exec", name, "ip", "link", "set", "lo", "up"},
	}
	for _, args := range steps {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			ns.Delete()
			return nil, fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return ns, nil
}

// Delete removes the namespace and its link.
func (ns *NetNS) Delete() {
	_ = exec.Command("ip", "link", "del", ns.hostLink).Run()
	_ = exec.Command("ip", "netns", "del", ns.Name).Run()
}

// Command runs name with args inside the namespace.
func (ns *NetNS) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns.Name, name}, args...)...)
}

// Dial connects from inside the network namespace name. A socket belongs to the namespace of
// the thread that creates it, so the dial runs on a thread locked for the purpose, which joins
// the namespace and returns to its own before it serves other goroutines. (A thread is never
// left to die: children started from it with a parent-death signal would die with it.)
func Dial(name string) func(ctx context.Context, network, address string) (net.Conn, error) {
	return func(ctx context.Context, network, address string) (net.Conn, error) {
		type result struct {
			conn net.Conn
			err  error
		}
		done := make(chan result, 1)
		go func() {
			runtime.LockOSThread()
			own, err := os.Open("/proc/thread-self/ns/net")
			if err != nil {
				runtime.UnlockOSThread()
				done <- result{err: err}
				return
			}
			defer own.Close()
			target, err := os.Open(filepath.Join("/var/run/netns", name))
			if err != nil {
				runtime.UnlockOSThread()
				done <- result{err: err}
				return
			}
			defer target.Close()
			if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
				runtime.UnlockOSThread()
				done <- result{err: fmt.Errorf("joining network namespace %s: %w", name, err)}
				return
			}
			conn, err := (&net.Dialer{}).DialContext(ctx, network, address)
			if unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil {
				runtime.UnlockOSThread()
			} // else the thread stays locked and ends with this goroutine
			done <- result{conn, err}
		}()
		r := <-done
		return r.conn, r.err
	}
}
