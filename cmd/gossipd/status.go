package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gossipd/gossipd/internal/apiclient"
	"github.com/gossipd/gossipd/internal/cli"
)

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("status", "status [--api ADDR] [--api-token FILE] | --store DIR\n\nPrints a running daemon's /status, or the health and contents of a stopped\ndaemon's --store (read without changing any of its files; exit status 1\nwhere it is damaged).", stderr)
	var af apiclient.Flags
	af.Declare(fs)
	storeDir := fs.String("store", "", "a stopped daemon's --store directory")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if cli.FlagSet(fs, "store") {
		if cli.FlagSet(fs, "api") || cli.FlagSet(fs, "api-token") || cli.FlagSet(fs, "api-ca") {
			return fmt.Errorf("%w: status: --store reads a stopped daemon's store, --api asks a running one: give one or the other", errUsage)
		}
		return storeStatus(*storeDir, stdout)
	}
	b, _, err := af.Request(ctx, "status", http.MethodGet, "/status", 5*time.Second)
	if err != nil {
		return err
	}
	_, err = stdout.Write(b)
	return err
}
