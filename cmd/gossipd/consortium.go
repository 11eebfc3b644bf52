package main

import (
	"context"
	"fmt"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/node/p2p"
)

// runConsortium dispatches `gossipd consortium init|add-member`.
func runConsortium(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.DispatchSub("consortium", []cli.Subcommand{
		{Name: "init", Summary: "create a consortium file: a fresh network key and the first members", Run: runConsortiumInit},
		{Name: "add-member", Summary: "admit peer IDs to a consortium file", Run: runConsortiumAdd},
	}, args, stdout, stderr)
}

func runConsortiumInit(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("consortium init", "consortium init --out FILE [PEERID ...]\n\nCreates a consortium file (mode 0600) with a fresh 256-bit network key and\nthe given members. Give it to every member; run each daemon with\n--consortium FILE.", stderr)
	out := fs.String("out", "consortium.yaml", "file to create")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	c, err := p2p.NewConsortium(fs.Args()...)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := c.SaveNew(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: a new network key and %d member(s)\n", *out, len(c.Members))
	return nil
}

func runConsortiumAdd(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("consortium add-member", "consortium add-member --file FILE PEERID [PEERID ...]\n\nAdmits peers to a consortium file (every member needs the updated file).", stderr)
	file := fs.String("file", "consortium.yaml", "consortium file")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("%w: consortium add-member: no peer ID given", errUsage)
	}
	c, err := p2p.LoadConsortium(*file)
	if err != nil {
		return err
	}
	for _, id := range fs.Args() {
		if err := c.Add(id); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if err := c.Save(*file); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d member(s)\n", *file, len(c.Members))
	return nil
}
