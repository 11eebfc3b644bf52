package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"text/tabwriter"
	"time"

	"github.com/gossipd/gossipd/internal/apiclient"
	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/node"
	"github.com/gossipd/gossipd/node/p2p"
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
	var jobs []node.AnnouncedJob
	var err error
	if *bootstrap == "" {
		if *consortium != "" || cli.FlagSet(fs, "listen-for") {
			return fmt.Errorf("%w: jobs: --consortium and --listen-for need --bootstrap", errUsage)
		}
		jobs, err = jobsFromAPI(ctx, af)
	} else {
		if cli.FlagSet(fs, "api") || cli.FlagSet(fs, "api-token") || cli.FlagSet(fs, "api-ca") {
			return fmt.Errorf("%w: jobs: --api, --api-token and --api-ca ask a daemon; --bootstrap listens instead: give one or the other", errUsage)
		}
		jobs, err = jobsFromNetwork(ctx, cli.SplitList(*bootstrap), *consortium, *listenFor)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(jobs)
	}
	if len(jobs) == 0 {
		fmt.Fprintln(stdout, "no jobs announced")
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNAME\tPROTOCOL\tMODEL\tMEMBERS\tBEST ACC\tJOINABLE")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.4f\t%v\n", j.JobID, j.Name, j.Protocol, j.Model, j.MembersSeen, j.BestAccuracy, j.Joinable)
	}
	return tw.Flush()
}

// jobsFromAPI reads a daemon's /jobs.
func jobsFromAPI(ctx context.Context, af apiclient.Flags) ([]node.AnnouncedJob, error) {
	b, base, err := af.Request(ctx, "jobs", http.MethodGet, "/jobs", 5*time.Second)
	if err != nil {
		return nil, err
	}
	var jobs []node.AnnouncedJob
	if err := json.Unmarshal(b, &jobs); err != nil {
		return nil, fmt.Errorf("jobs: %s/jobs: %w", base, err)
	}
	return jobs, nil
}

// jobsFromNetwork joins the network with a throwaway identity and listens
// for announcements.
func jobsFromNetwork(ctx context.Context, bootstrap []string, consortium string, d time.Duration) ([]node.AnnouncedJob, error) {
	key, err := p2p.NewEphemeralKey()
	if err != nil {
		return nil, err
	}
	var club *p2p.Consortium
	if consortium != "" {
		if club, err = p2p.LoadConsortium(consortium); err != nil {
			return nil, err
		}
	}
	host, err := p2p.New(p2p.Config{Key: key, Listen: []string{"/ip4/0.0.0.0/tcp/0"}, Bootstrap: bootstrap, Consortium: club, Observer: true, DHT: p2p.DHTOff, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, err
	}
	defer host.Close()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(d):
	}
	return node.SummarizeJobs(host.Announcements(), time.Now(), d+3*node.DefaultAnnounceInterval), nil
}
