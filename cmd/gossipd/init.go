package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/node"
	"github.com/gossipd/gossipd/node/apiserver"
)

func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("init", "init [--out FILE] [--profile default|edge] [--api-token FILE]\n\nWrites a commented config file for `gossipd run --config FILE`: every\nsetting at its default, or at a profile's value (edge: small memory, paced\ntraffic, fewer connections). It also creates an API bearer token file\n(mode 0600; kept if it exists), which the config names, for job control\nand for an API beyond loopback.", stderr)
	out := fs.String("out", "gossipd.yaml", "file to write ('-' for stdout)")
	profile := fs.String("profile", "default", "settings for: default|edge")
	tokenFile := fs.String("api-token", "", "API token file to create (default api.token beside --out; \"\" given: none)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	settings, ok := node.Profiles[*profile]
	if !ok {
		return fmt.Errorf("%w: --profile %q, want default|edge", errUsage, *profile)
	}
	if *out != "-" {
		if _, err := os.Stat(*out); err == nil {
			return fmt.Errorf("%w: %s exists", errUsage, *out)
		}
	}
	rf := flag.NewFlagSet("run", flag.ContinueOnError)
	var r node.Settings
	r.Register(rf)
	header := "# gossipd run configuration. Keys are `gossipd run` flags; flags and\n# $GOSSIPD_* variables override what is set here.\n"
	if len(settings) > 0 {
		header += fmt.Sprintf("#\n# Profile %s:\n", *profile)
		for _, x := range settings {
			if err := rf.Set(x.Flag, x.Value); err != nil {
				return fmt.Errorf("profile %s: %s: %w", *profile, x.Flag, err)
			}
			header += fmt.Sprintf("#   %s: %s (%s)\n", x.Flag, x.Value, x.Why)
		}
	}
	if *tokenFile == "" && !cli.FlagSet(fs, "api-token") {
		dir := "."
		if *out != "-" {
			dir = filepath.Dir(*out)
		}
		*tokenFile = filepath.Join(dir, "api.token")
	}
	if *tokenFile != "" {
		abs, err := filepath.Abs(*tokenFile)
		if err != nil {
			return err
		}
		_, created, err := apiserver.LoadOrCreateTokenFile(abs)
		if err != nil {
			return err
		}
		rf.Set("api-token", abs)
		verb := "created"
		if !created {
			verb = "kept"
		}
		fmt.Fprintf(stderr, "%s the API token %s (mode 0600): give it to clients with --api-token\n", verb, abs)
	}
	return cli.WriteNew(*out, cli.SettingsTemplate(rf, header+"\n", "config"), stdout)
}
