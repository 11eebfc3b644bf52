// Command linkemu emulates what the e2e suite's links and hosts need and
// this kernel lacks (it has no netem). It runs in containers of its own
// image (built by `make e2e-images` from deploy/e2e/linkemu/Dockerfile):
//
//	linkemu delay --queue 0 --delay 40ms --jitter 10ms
//
// holds every packet that iptables queues to NFQUEUE number --queue for
// --delay plus a uniform draw in [0, --jitter), then lets it through: a
// container started with --network container:NAME --cap-add NET_ADMIN
// delays NAME's packets, for example its incoming ones with
//
//	iptables -A INPUT -j NFQUEUE --queue-num 0 --queue-bypass
//
// (--queue-bypass: without a linkemu listening, packets pass). A full
// queue lets packets through rather than drop them.
//
//	linkemu router
//
// does nothing until it is stopped: the process of a container that serves
// as a NAT router, whose forwarding and masquerading the suite sets up
// with iptables in its network namespace.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: linkemu delay|router [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "delay":
		err = runDelay(os.Args[2:])
	case "router":
		err = runRouter(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q: want delay or router", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "linkemu:", err)
		os.Exit(1)
	}
}

// stopped is closed on SIGTERM or SIGINT.
func stopped() <-chan os.Signal {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	return c
}

func runRouter(args []string) error {
	fs := flag.NewFlagSet("router", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("router: unexpected arguments %v", fs.Args())
	}
	<-stopped()
	return nil
}

// delayConfig is what `linkemu delay` does.
type delayConfig struct {
	Queue  uint16
	Delay  time.Duration
	Jitter time.Duration
	MaxLen uint32
}

// Validate checks the configuration.
func (c delayConfig) Validate() error {
	if c.Delay < 0 || c.Jitter < 0 {
		return fmt.Errorf("delay %v and jitter %v must not be negative", c.Delay, c.Jitter)
	}
	if c.Delay+c.Jitter > 10*time.Second {
		return fmt.Errorf("delay %v plus jitter %v: at most 10s", c.Delay, c.Jitter)
	}
	if c.MaxLen == 0 {
		return fmt.Errorf("queue length must be positive")
	}
	return nil
}

// hold is how long one packet is held.
func (c delayConfig) hold(r *rand.Rand) time.Duration {
	d := c.Delay
	if c.Jitter > 0 {
		d += time.Duration(r.Int64N(int64(c.Jitter)))
	}
	return d
}

func runDelay(args []string) error {
	fs := flag.NewFlagSet("delay", flag.ContinueOnError)
	var c delayConfig
	q := fs.Uint("queue", 0, "NFQUEUE number to serve")
	fs.DurationVar(&c.Delay, "delay", 40*time.Millisecond, "how long to hold each packet")
	fs.DurationVar(&c.Jitter, "jitter", 0, "plus a uniform draw in [0, jitter)")
	maxLen := fs.Uint("max-len", 4096, "packets held at most (more pass at once)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("delay: unexpected arguments %v", fs.Args())
	}
	if *q > 65535 {
		return fmt.Errorf("delay: --queue %d: at most 65535", *q)
	}
	c.Queue, c.MaxLen = uint16(*q), uint32(*maxLen)
	if err := c.Validate(); err != nil {
		return fmt.Errorf("delay: %w", err)
	}
	nq, err := openQueue(c.Queue, c.MaxLen)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	log.Info("delaying queued packets", "queue", c.Queue, "delay", c.Delay, "jitter", c.Jitter)
	var held, failed atomic.Uint64
	go func() {
		<-stopped()
		log.Info("stopping", "packets", held.Load(), "verdict_errors", failed.Load())
		nq.close()
		os.Exit(0)
	}()
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))
	buf := make([]byte, 1<<16)
	for {
		evs, err := nq.read(buf)
		if err != nil {
			return err
		}
		for _, e := range evs {
			if !e.packet {
				continue
			}
			held.Add(1)
			id := e.id
			time.AfterFunc(c.hold(r), func() {
				if err := nq.accept(id); err != nil && failed.Add(1) <= 3 {
					log.Warn("verdict", "packet", id, "err", err)
				}
			})
		}
	}
}
