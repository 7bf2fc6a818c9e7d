// Command etcd is a plain etcd server built from go.etcd.io/etcd/server/v3, so the project's test
// clusters need no prebuilt binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
