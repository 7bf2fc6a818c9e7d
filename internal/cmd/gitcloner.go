package cmd

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fleetgo/fleet/internal/gitsource"
)

// clonerFiles are gitcloner's flags naming files, read into the Source before the clone.
type clonerFiles struct {
	password, key, knownHosts, ca, appKey string
}

// readInto reads the files into src; app becomes src's GitHub App when its key is given.
func (f *clonerFiles) readInto(src *gitsource.Source, app *gitsource.GitHubApp) error {
	read := func(flag, path string) ([]byte, error) {
		if path == "" {
			return nil, nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("--%s: %w", flag, err)
		}
		return data, nil
	}
	password, err := read("password-file", f.password)
	if err != nil {
		return err
	}
	src.Auth.Password = strings.TrimSpace(string(password))
	if src.Auth.SSHPrivateKey, err = read("ssh-private-key-file", f.key); err != nil {
		return err
	}
	if src.Auth.KnownHosts, err = read("known-hosts-file", f.knownHosts); err != nil {
		return err
	}
	if src.CABundle, err = read("ca-bundle-file", f.ca); err != nil {
		return err
	}
	if f.appKey != "" {
		if app.PrivateKey, err = read("github-app-private-key-file", f.appKey); err != nil {
			return err
		}
		src.Auth.GitHubApp = app
	}
	return nil
}

func newGitCloner() *cobra.Command {
	var (
		src    gitsource.Source
		files  clonerFiles
		app    gitsource.GitHubApp
		commit string
	)
	c := &cobra.Command{
		Use:   "gitcloner [flags] REPO DIR",
		Short: "Clone a git repository's branch or revision into DIR (the first step of a GitRepo's Job)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			src.URL = args[0]
			if err := files.readInto(&src, &app); err != nil {
				return err
			}
			got, err := gitsource.Checkout(cmd.Context(), src, args[1], commit)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "checked out %s of %s\n", got, src.URL)
			return err
		},
	}
	fl := c.Flags()
	fl.StringVarP(&src.Branch, "branch", "b", "", "branch to clone (default master)")
	fl.StringVar(&src.Revision, "revision", "", "commit or tag to check out instead of the branch's head")
	fl.StringVar(&commit, "commit", "", "commit of the branch to check out (default its head)")
	fl.StringVar(&src.Auth.Username, "username", "", "username for HTTP(S) basic auth")
	fl.StringVar(&files.password, "password-file", "", "file holding the password for HTTP(S) basic auth")
	fl.StringVar(&files.key, "ssh-private-key-file", "", "file holding the SSH private key")
	fl.StringVar(&files.knownHosts, "known-hosts-file", "", "known_hosts file for SSH (required with a key, unless --insecure-skip-host-key-checks)")
	fl.BoolVar(&src.Auth.InsecureIgnoreHostKey, "insecure-skip-host-key-checks", false, "trust SSH hosts the known_hosts file does not name, whatever their key")
	fl.StringVar(&files.ca, "ca-bundle-file", "", "PEM file of CAs to trust for HTTPS")
	fl.Int64Var(&app.ID, "github-app-id", 0, "with --github-app-private-key-file: clone as this GitHub App")
	fl.Int64Var(&app.InstallationID, "github-app-installation-id", 0, "the GitHub App's installation to clone as")
	fl.StringVar(&files.appKey, "github-app-private-key-file", "", "file holding the GitHub App's private key (PEM)")
	fl.StringVar(&app.BaseURL, "github-app-base-url", "", "the GitHub API's base URL (default https://api.github.com)")
	fl.BoolVar(&src.InsecureSkipTLSVerify, "insecure-skip-tls", false, "do not verify the server's TLS certificate")
	return c
}
