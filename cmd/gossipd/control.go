package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/gossipd/gossipd/daemon/apiserver"
	"github.com/gossipd/gossipd/internal/apiclient"
	"github.com/gossipd/gossipd/internal/cli"
)

// Job control of a running daemon through its API (POST /pause, /resume,
// /leave), which needs its token.

func runPause(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return control(ctx, "pause", "pause [--api ADDR] [--api-token FILE]\n\nPauses a running daemon's local training: it stays in the job, averaging\nand forwarding models, but takes no step on its data and spends no\nprivacy budget until `gossipd resume` (or a restart).", args, stdout, stderr)
}

func runResume(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return control(ctx, "resume", "resume [--api ADDR] [--api-token FILE]\n\nResumes a paused daemon's local training.", args, stdout, stderr)
}

func runLeave(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return control(ctx, "leave", "leave [--api ADDR] [--api-token FILE]\n\nMakes a running daemon leave its job: it says goodbye (a push-sum node\nhands off its weight), writes a final checkpoint and exits with status 0.\nA service manager that restarts it on success (Kubernetes) starts it\nagain: scale the StatefulSet down instead.", args, stdout, stderr)
}

func control(ctx context.Context, action, usage string, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet(action, usage, stderr)
	var af apiclient.Flags
	af.Declare(fs)
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: %s takes no arguments (got %q)", errUsage, action, fs.Args())
	}
	b, base, err := af.Request(ctx, action, http.MethodPost, "/"+action, 15*time.Second)
	if err != nil {
		return err
	}
	var reply map[string]any
	if err := json.Unmarshal(b, &reply); err != nil {
		return fmt.Errorf("%s: %s answered %q: %w", action, base, b, err)
	}
	switch action {
	case "leave":
		fmt.Fprintf(stdout, "leaving job %v: the daemon says goodbye, checkpoints and exits\n", reply["job_id"])
	default:
		fmt.Fprintf(stdout, "paused: %v\n", reply["paused"])
	}
	return nil
}

func runToken(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("token", "token --out FILE [--keep]\n\nCreates an API bearer token file (mode 0600) for `gossipd run --api-token\nFILE` and its clients.", stderr)
	out := fs.String("out", "api.token", "token file to create")
	keep := fs.Bool("keep", false, "use the file if it exists (for a deployment's one-shot step) instead of refusing")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if *keep {
		_, created, err := apiserver.LoadOrCreateTokenFile(*out)
		if err != nil {
			return err
		}
		if created {
			fmt.Fprintf(stdout, "created %s\n", *out)
		} else {
			fmt.Fprintf(stdout, "kept %s\n", *out)
		}
		return nil
	}
	if _, err := apiserver.CreateTokenFile(*out); err != nil {
		return fmt.Errorf("%w: %v (--keep uses an existing file)", errUsage, err)
	}
	fmt.Fprintf(stdout, "created %s\n", *out)
	return nil
}
