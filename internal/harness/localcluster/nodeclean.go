package localcluster

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// cleanup removes what a stopped node leaves behind once its kubelet and containerd have
// exited: the containers and their runc shims (both outlive containerd by design), the mounts
// under the node's folder, and its cgroups. Best effort: a stopped cluster never fails.
func (n *nodeStarter) cleanup() {
	hs, _ := cgroupHierarchies()
	for _, h := range hs {
		killCgroupTree(filepath.Join(h, n.cgroups))
	}
	killShims(filepath.Join(n.dir, "containerd", "containerd.sock"))
	unmountBelow(n.dir)
	for _, h := range hs {
		removeCgroupTree(filepath.Join(h, n.cgroups))
	}
}

// killCgroupTree sends SIGKILL to every process in the cgroup and its descendants.
func killCgroupTree(root string) {
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		data, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return nil
	})
}

// killShims kills the runc shims started by the containerd listening on address.
func killShims(address string) {
	procs, _ := os.ReadDir("/proc")
	for _, e := range procs {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := bytes.Split(cmdline, []byte{0})
		if len(args) == 0 || !strings.HasSuffix(string(args[0]), "containerd-shim-runc-v2") {
			continue
		}
		if bytes.Contains(cmdline, []byte(address)) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// unmountBelow detaches every mount point under dir, deepest first.
func unmountBelow(dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && (fields[4] == dir || strings.HasPrefix(fields[4], dir+"/")) {
			points = append(points, fields[4])
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, p := range points {
		_ = unix.Unmount(p, unix.MNT_DETACH)
	}
}

// removeCgroupTree removes the cgroup and its descendants, deepest first.
func removeCgroupTree(root string) {
	var dirs []string
	_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		_ = os.Remove(dirs[i])
	}
}
