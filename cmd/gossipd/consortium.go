package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/internal/cli"
)

// runConsortium dispatches `gossipd consortium init|add-member`.
func runConsortium(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.DispatchSub("consortium", []cli.Subcommand{
		{Name: "init", Summary: "create a consortium file: a fresh network key and the first members", Run: runConsortiumInit},
		{Name: "add-member", Summary: "admit peer IDs to a consortium file", Run: runConsortiumAdd},
	}, args, stdout, stderr)
}

func runConsortiumInit(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("consortium init", "consortium init --out FILE [--keep] [PEERID|@FILE ...]\n\nCreates a consortium file (mode 0600) with a fresh 256-bit network key and\nthe given members. Give it to every member; run each daemon with\n--consortium FILE. A member given as @FILE is read from FILE: a peer ID,\nor an address ending in /p2p/ID (as keygen --addr-out writes it).", stderr)
	out := fs.String("out", "consortium.yaml", "file to create")
	keep := fs.Bool("keep", false, "if the file exists, keep its key and add the members to it (for a deployment's one-shot step) instead of refusing")
	members, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	ids, err := p2p.ReadMembers(members)
	if err != nil {
		return memberUsage(err)
	}
	c, created, err := p2p.InitConsortium(*out, *keep, ids...)
	switch {
	case err != nil:
		return memberUsage(err)
	case created:
		fmt.Fprintf(stdout, "wrote %s: a new network key and %d member(s)\n", *out, len(c.Members))
	default:
		fmt.Fprintf(stdout, "%s: %d member(s)\n", *out, len(c.Members))
	}
	return nil
}

func runConsortiumAdd(args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("consortium add-member", "consortium add-member --file FILE PEERID|@FILE [...]\n\nAdmits peers to a consortium file (every member needs the updated file).", stderr)
	file := fs.String("file", "consortium.yaml", "consortium file")
	members, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(members) == 0 {
		return fmt.Errorf("%w: consortium add-member: no peer ID given", errUsage)
	}
	ids, err := p2p.ReadMembers(members)
	if err == nil {
		var c *p2p.Consortium
		if c, err = p2p.AddMembers(*file, ids...); err == nil {
			fmt.Fprintf(stdout, "%s: %d member(s)\n", *file, len(c.Members))
		}
	}
	return memberUsage(err)
}

// memberUsage makes a member that is no peer ID a usage error.
func memberUsage(err error) error {
	if errors.Is(err, p2p.ErrMember) {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return err
}
