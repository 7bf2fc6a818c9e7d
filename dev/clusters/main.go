// Command clusters runs a management cluster and N downstream clusters on loopback until it is
// interrupted, for dev/up and the quickstart. It writes each cluster's admin kubeconfig as
// DIR/<name>.kubeconfig and, once every cluster is ready, DIR/ready listing them.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fleetgo/fleet/internal/harness/localcluster"
)

func main() {
	dir := flag.String("dir", filepath.Join(os.TempDir(), "fleet-dev"), "folder for cluster state, logs and kubeconfigs")
	downstream := flag.Int("downstream", 2, "number of downstream clusters")
	flag.Parse()
	if err := run(*dir, *downstream); err != nil {
		fmt.Fprintf(os.Stderr, "clusters: %v\n", err)
		os.Exit(1)
	}
}

func run(dir string, downstream int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	_ = os.Remove(filepath.Join(dir, "ready"))

	opts := []localcluster.Options{{Name: "management", Tier: localcluster.Workloads, Dir: filepath.Join(dir, "management")}}
	for i := 1; i <= downstream; i++ {
		name := fmt.Sprintf("downstream%d", i)
		opts = append(opts, localcluster.Options{Name: name, Tier: localcluster.Workloads, Dir: filepath.Join(dir, name)})
	}
	for _, o := range opts {
		// State from an earlier run would make etcd start with stale data and old certificates.
		if err := os.RemoveAll(o.Dir); err != nil {
			return err
		}
	}
	fmt.Printf("starting %d clusters in %s\n", len(opts), dir)
	clusters, err := localcluster.StartAll(ctx, opts...)
	if err != nil {
		return err
	}
	defer func() {
		for _, c := range clusters {
			c.Stop()
		}
	}()

	var lines []string
	for _, c := range clusters {
		link := filepath.Join(dir, c.Name+".kubeconfig")
		_ = os.Remove(link)
		if err := os.Symlink(c.Kubeconfig, link); err != nil {
			return err
		}
		lines = append(lines, fmt.Sprintf("%-12s %s  (%s, logs in %s)", c.Name, link, c.Server, c.LogDir))
	}
	summary := strings.Join(lines, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, "ready"), []byte(summary), 0o644); err != nil {
		return err
	}
	fmt.Print(summary)
	<-ctx.Done()
	fmt.Println("stopping clusters")
	_ = os.Remove(filepath.Join(dir, "ready"))
	return nil
}
