package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gossipd/gossipd/daemon"
	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/internal/apiclient"
	"github.com/gossipd/gossipd/internal/cli"
)

func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("jobs", "jobs [--api ADDR | --bootstrap ADDRS [--listen-for D]] [--json]\n\nLists the jobs announced on the network (ID, protocol, model, members seen,\nbest accuracy reported): as a running daemon heard them (--api), or by\nlistening for announcements itself (--bootstrap), to find a job to --join.", stderr)
	var af apiclient.Flags
	af.Declare(fs)
	bootstrap := fs.String("bootstrap", "", "listen on the network instead: bootstrap peers (multiaddrs with /p2p/ID, comma-separated)")
	consortium := fs.String("consortium", "", "with --bootstrap: the consortium file of a private network")
	listenFor := fs.Duration("listen-for", 12*time.Second, "with --bootstrap: how long to listen for announcements")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if err := cli.CheckNumbers(fs, cli.Bounds{"listen-for": "(0,inf)"}); err != nil {
		return err
	}
	var jobs []daemon.AnnouncedJob
	if *bootstrap == "" {
		if *consortium != "" || cli.FlagSet(fs, "listen-for") {
			return fmt.Errorf("%w: jobs: --consortium and --listen-for need --bootstrap", errUsage)
		}
		b, base, err := af.Request(ctx, "jobs", http.MethodGet, "/jobs", 5*time.Second)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &jobs); err != nil {
			return fmt.Errorf("jobs: %s/jobs: %w", base, err)
		}
	} else {
		if cli.FlagSet(fs, "api") || cli.FlagSet(fs, "api-token") || cli.FlagSet(fs, "api-ca") {
			return fmt.Errorf("%w: jobs: --api, --api-token and --api-ca ask a daemon; --bootstrap listens instead: give one or the other", errUsage)
		}
		anns, err := p2p.ListenForAnnouncements(ctx, cli.SplitList(*bootstrap), *consortium, *listenFor)
		if err != nil {
			return err
		}
		jobs = daemon.SummarizeJobs(anns, time.Now(), *listenFor+3*daemon.DefaultAnnounceInterval)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(jobs)
	}
	return daemon.WriteJobs(stdout, jobs)
}
