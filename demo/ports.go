package demo

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// FreePorts returns k distinct TCP ports on 127.0.0.1 that were free when
// picked, for daemons about to be started with them. A port the kernel
// hands out for ":0" is an ephemeral one, and between the pick and the
// daemon's bind any outgoing connection on the machine (every dial takes
// an ephemeral port: the daemons' own dials to one another, a parallel
// test's) can take it. So the ports come from below the kernel's
// ephemeral range (/proc/sys/net/ipv4/ip_local_port_range, by default
// 32768 to 60999), from 10000 up, starting at a random place, each bound
// to check it is free and held until all are picked. Where that range is
// too small (a machine whose ephemeral range starts low) they are the
// kernel's ":0" ports, as before.
func FreePorts(k int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	out := make([]int, 0, k)
	const low = 10000
	if high := ephemeralStart(); high-low >= 1000 {
		span := high - low
		start := rand.IntN(span)
		for i := 0; i < span && len(out) < k; i++ {
			port := low + (start+i)%span
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				continue // taken
			}
			ls = append(ls, l)
			out = append(out, port)
		}
	}
	for len(out) < k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, errors.Join(errors.New("demo: no free port on 127.0.0.1"), err)
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range, or
// 32768 (Linux's default) where it cannot be read.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &lo, &hi); err != nil || lo <= 0 {
		return 32768
	}
	return lo
}
