package main

import (
	"context"
	"io"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/internal/cli"
)

func runInit(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("init", "init [--out FILE] [--profile default|edge] [--api-token FILE]\n\nWrites a commented config file for `gossipd run --config FILE`: every\nsetting at its default, or at a profile's value (edge: small memory, paced\ntraffic, fewer connections). It also creates an API bearer token file\n(mode 0600; kept if it exists), which the config names, for job control\nand for an API beyond loopback.", stderr)
	out := fs.String("out", "gossipd.yaml", "file to write ('-' for stdout)")
	profile := fs.String("profile", "default", "settings for: default|edge")
	tokenFile := fs.String("api-token", "", "API token file to create (default api.token beside --out; \"\" given: none)")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	return daemon.WriteConfig(daemon.InitOptions{Out: *out, Profile: *profile, TokenFile: *tokenFile,
		NoToken: *tokenFile == "" && cli.FlagSet(fs, "api-token")}, stdout, stderr)
}
