package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gossipd/gossipd/daemon/p2p"
	"github.com/gossipd/gossipd/internal/cli"
)

func runKeygen(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := cli.NewFlagSet("keygen", "keygen --out FILE [--keep] [--addr MULTIADDR --addr-out FILE]\n\nCreates an identity key (mode 0600) and prints its peer ID; with --addr, also\nwrites MULTIADDR/p2p/ID to --addr-out, for others' --bootstrap @FILE.", stderr)
	out := fs.String("out", "identity.key", "key file to create")
	keep := fs.Bool("keep", false, "use the key file if it exists (for a deployment's one-shot step) instead of refusing")
	addr := fs.String("addr", "", "this peer's address without /p2p (e.g. /dns4/node0/tcp/4001), for --addr-out")
	addrOut := fs.String("addr-out", "", "file to write ADDR/p2p/ID to")
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	if (*addr == "") != (*addrOut == "") {
		return fmt.Errorf("%w: keygen: --addr and --addr-out go together", errUsage)
	}
	if _, err := os.Stat(*out); err == nil && !*keep {
		return fmt.Errorf("%w: %s exists; refusing to overwrite an identity (--keep uses it)", errUsage, *out)
	}
	k, err := p2p.LoadOrCreateKey(*out)
	if err != nil {
		return err
	}
	id, err := p2p.PeerIDOf(k)
	if err != nil {
		return err
	}
	if *addr != "" {
		full := strings.TrimSuffix(*addr, "/") + "/p2p/" + id
		if err := p2p.CheckAddr(full); err != nil {
			return fmt.Errorf("%w: keygen: --addr: %v", errUsage, err)
		}
		if err := os.WriteFile(*addrOut, []byte(full+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout, id)
	return nil
}
