package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkProcessCluster starts $GOSSIPD_BENCH_PROCS (default 50) real
// `gossipd run` processes on 127.0.0.1, each on its shard of digits with
// random walk, and reports the seconds until every daemon's accuracy is
// ≥ 0.9 and the mean resident memory per daemon. Run it alone:
//
//	go test ./cmd/gossipd -run '^$' -bench ProcessCluster -benchtime 1x
func BenchmarkProcessCluster(b *testing.B) {
	n := 50
	if v, err := strconv.Atoi(os.Getenv("GOSSIPD_BENCH_PROCS")); err == nil && v > 1 {
		n = v
	}
	bin := buildBinary(b)
	for b.Loop() {
		start := time.Now()
		ds := startCluster(b, bin, b.TempDir(), n, "200ms")
		deadline := time.Now().Add(5 * time.Minute)
		for _, d := range ds {
			for {
				s, err := d.status()
				if err == nil && s.Accuracy >= 0.9 {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("%s did not reach 0.9 in 5 minutes (last %+v, %v)", d.api, s, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		conv := time.Since(start)
		var rss float64
		for _, d := range ds {
			rss += vmRSS(d.cmd.Process.Pid)
		}
		for _, d := range ds {
			d.cmd.Process.Signal(os.Interrupt)
		}
		for _, d := range ds {
			d.cmd.Wait()
		}
		b.ReportMetric(float64(n), "daemons")
		b.ReportMetric(conv.Seconds(), "s-to-converge")
		b.ReportMetric(rss/float64(n)/(1<<20), "MiB-RSS/daemon")
	}
}

// vmRSS reads a process's resident set size in bytes from /proc.
func vmRSS(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb * 1024
		}
	}
	return 0
}
