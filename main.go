// Command fleet is the one binary of the project: manager controllers, the agent, and the CLI.
package main

//go:generate go run ./pkg/codegen

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/fleetgo/fleet/internal/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cmd.New().ExecuteContext(ctx)
	stop()
	if err == nil {
		return
	}
	code := 1
	var exit *cmd.ExitCode
	if errors.As(err, &exit) {
		code = exit.Code
	}
	if err.Error() != "" {
		fmt.Fprintf(os.Stderr, "fleet: %v\n", err)
	}
	os.Exit(code)
}
