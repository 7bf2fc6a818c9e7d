//go:build tools

package main

// controller-gen is run with `go run`; this import pins it in go.mod.
import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
