package demo

import (
	"flag"
	"fmt"
	"io"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model/device"
)

// Flags are `gossipd demo`'s settings as flags give them.
type Flags struct {
	c Config
	// JSON prints the summary as JSON, and no live view.
	JSON bool
}

// Bounds are the values demo's numeric flags take.
var Bounds = cli.Bounds{"peers": "[2,32]", "delta": "(0,inf)", "target": "(0,1]", "duration": "(0,inf)"}

// Register declares demo's flags on fs.
func (f *Flags) Register(fs *flag.FlagSet) {
	c := &f.c
	fs.IntVar(&c.Peers, "peers", 8, "daemons to start (2 to 32)")
	fs.StringVar(&c.Protocol, "protocol", "randomwalk", "gossip protocol")
	fs.StringVar(&c.Partition, "partition", "shards:2", "how the digits are split among the peers: shards:k|dirichlet:α|iid")
	fs.DurationVar(&c.Delta, "delta", 0, "gossip period (default 200ms)")
	fs.Float64Var(&c.Target, "target", 0.9, "stop once the peers' mean accuracy holds at this")
	fs.DurationVar(&c.Duration, "duration", 0, "stop after this long at most (default 1m)")
	fs.StringVar(&c.PNG, "png", "demo-curves.png", "where to write the curves")
	fs.StringVar(&c.Dir, "dir", "", "keep the peers' stores and logs here (default: a temporary directory, removed)")
	fs.StringVar(&c.Device, "device", "auto", "where the daemons train: auto|cpu|cuda[:N] (their run --device)")
	fs.BoolVar(&f.JSON, "json", false, "print the summary as JSON (and no live view)")
}

// Config returns the validated Config of the flags of fs (parsed), whose
// view goes to out (live where out is a terminal) unless JSON. Refusals,
// a device that cannot be had here among them, wrap cli.ErrUsage.
func (f *Flags) Config(fs *flag.FlagSet, out io.Writer) (Config, error) {
	if err := cli.CheckNumbers(fs, Bounds); err != nil {
		return Config{}, err
	}
	c := f.c
	c.Out = out
	c.Live = !f.JSON && cli.IsTerminal(out)
	if f.JSON {
		c.Out = io.Discard
	}
	if err := c.Validate(); err != nil {
		return Config{}, fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	if err := cli.CheckOutput("png", c.PNG); err != nil {
		return Config{}, err
	}
	spec, err := device.Parse(c.Device)
	if err == nil {
		_, _, err = device.Open(spec)
	}
	if err != nil {
		return Config{}, fmt.Errorf("%w: %v", cli.ErrUsage, err)
	}
	return c, nil
}
