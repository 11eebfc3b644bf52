package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

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
	fs := cli.NewFlagSet("consortium init", "consortium init --out FILE [--keep] [PEERID|@FILE ...]\n\nCreates a consortium file (mode 0600) with a fresh 256-bit network key and\nthe given members. Give it to every member; run each daemon with\n--consortium FILE. A member given as @FILE is read from FILE: a peer ID,\nor an address ending in /p2p/ID (as keygen --addr-out writes it).", stderr)
	out := fs.String("out", "consortium.yaml", "file to create")
	keep := fs.Bool("keep", false, "if the file exists, keep its key and add the members to it (for a deployment's one-shot step) instead of refusing")
	members, err := cli.ParseArgs(fs, args)
	if err != nil {
		return err
	}
	ids, err := memberIDs(members)
	if err != nil {
		return err
	}
	if *keep {
		if _, err := os.Stat(*out); err == nil {
			return addMembers(*out, ids, stdout)
		}
	}
	c, err := p2p.NewConsortium(ids...)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if err := c.SaveNew(*out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: a new network key and %d member(s)\n", *out, len(c.Members))
	return nil
}

// memberIDs reads consortium members: peer IDs, or @FILE naming a file
// that holds one (a bare ID, or an address ending in /p2p/ID).
func memberIDs(args []string) ([]string, error) {
	var out []string
	for _, a := range args {
		path, ok := strings.CutPrefix(a, "@")
		if !ok {
			out = append(out, a)
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("consortium member %s: %w", a, err)
		}
		s := strings.TrimSpace(string(b))
		if i := strings.LastIndex(s, "/p2p/"); i >= 0 {
			s = s[i+len("/p2p/"):]
		}
		if err := p2p.CheckPeerID(s); err != nil {
			return nil, fmt.Errorf("%w: consortium member %s: %v", errUsage, a, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// addMembers admits ids to the consortium file at path.
func addMembers(path string, ids []string, stdout io.Writer) error {
	c, err := p2p.LoadConsortium(path)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if err := c.Add(id); err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
	}
	if err := c.Save(path); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s: %d member(s)\n", path, len(c.Members))
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
	ids, err := memberIDs(members)
	if err != nil {
		return err
	}
	return addMembers(*file, ids, stdout)
}
