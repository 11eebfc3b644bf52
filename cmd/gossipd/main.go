// Command gossipd is the gossip learning daemon (run) and its tools: the
// simulator (simulate, plot, robustness), centralized training (train),
// benchmarks (bench), privacy accounting, consortium files, keys, status
// and model export. Each subcommand parses its flags, calls the packages
// that do the work and formats their output.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/gossipd/gossipd/model/compute"

	"github.com/gossipd/gossipd/internal/cli"
)

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"demo", "watch a handful of local daemons learn together, with no server", runDemo},
		{"train", "train a model centrally on one machine", runTrain},
		{"simulate", "simulate many peers of a protocol on virtual time", runSimulate},
		{"plot", "plot the accuracy curves of simulation runs", runPlot},
		{"run", "run the daemon: train and gossip with peers over libp2p", runRun},
		{"status", "print a running daemon's status", runStatus},
		{"jobs", "list the jobs announced on the network, to --join one", runJobs},
		{"pause", "pause a running daemon's local training (it stays in the job)", runPause},
		{"resume", "resume a paused daemon's local training", runResume},
		{"leave", "make a running daemon leave its job and exit", runLeave},
		{"init", "write a commented default config file and an API token", runInit},
		{"keygen", "create an identity key and print its peer ID", runKeygen},
		{"token", "create an API bearer token file", runToken},
		{"export", "write a model as safetensors: a store's newest, or a running daemon's", runExport},
		{"consortium", "create and extend a consortium (private network key and members)", runConsortium},
		{"robustness", "simulate every aggregator under every attack; write the table", runRobustness},
		{"turnover", "simulate members leaving, dying and joining mid-run; write the table", runTurnover},
		{"commtable", "simulate protocols under each compression; write the bytes-to-accuracy table", runCommTable},
		{"privacy", "differential privacy: ε spent by DP-SGD, noise for a budget", runPrivacy},
		{"bench", "benchmark GEMM and training (optionally against PyTorch)", runBench},
		{"devices", "list where training can run: the CPU's kernels and CUDA GPUs", runDevices},
		{"version", "print the version", runVersion},
	}
}

// errUsage marks errors caused by bad command-line input (exit status 2).
var errUsage = cli.ErrUsage

func main() {
	// A hang-up (the terminal closed) stops gracefully too, where Go's
	// default would kill the process before its goodbye and checkpoint.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	os.Exit(mainExit(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func mainExit(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := dispatch(ctx, args, stdout, stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "gossipd: %v\n", err)
		return 2
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "gossipd: interrupted")
		return 130
	default:
		fmt.Fprintf(stderr, "gossipd: %v\n", err)
		return 1
	}
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stderr)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	if err := compute.CheckKernelEnv(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	name := args[0]
	if name == "help" || name == "-h" || name == "--help" || name == "-help" {
		if len(args) > 1 {
			return dispatch(ctx, []string{args[1], "--help"}, stdout, stderr)
		}
		usage(stdout)
		return nil
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	usage(stderr)
	return fmt.Errorf("%w: unknown command %q", errUsage, name)
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "gossipd — peer-to-peer gossip learning\n\nUsage: gossipd <command> [flags]\n\nCommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'gossipd <command> --help' for a command's flags.\n")
}
