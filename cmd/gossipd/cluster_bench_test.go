package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	bin := buildBinaryB(b)
	for b.Loop() {
		dir := b.TempDir()
		key0 := filepath.Join(dir, "n0", "identity.key")
		out, err := exec.Command(bin, "keygen", "--out", key0).Output()
		if err != nil {
			b.Fatal(err)
		}
		id0 := strings.TrimSpace(string(out))
		ds := make([]*daemon, n)
		b.Cleanup(func() { // also when the benchmark fails
			for _, d := range ds {
				if d != nil && d.cmd != nil && d.cmd.ProcessState == nil {
					d.cmd.Process.Kill()
					d.cmd.Wait()
				}
			}
		})
		var boot string
		ports := freePorts(b, 2*n)
		start := time.Now()
		for i := range ds {
			listen := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d", ports[2*i])
			if i == 0 {
				boot = listen + "/p2p/" + id0
			}
			ds[i] = &daemon{api: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1]), log: filepath.Join(dir, fmt.Sprintf("n%d.log", i))}
			ds[i].args = []string{"run", "--store", filepath.Join(dir, fmt.Sprintf("n%d", i)), "--listen", listen, "--api", ds[i].api,
				"--shard", fmt.Sprintf("%d/%d", i, n), "--delta", "200ms", "--lr", "0.5", "--mdns=false", "--log-format", "json"}
			if i > 0 {
				ds[i].args = append(ds[i].args, "--bootstrap", boot)
			}
			ds[i].start(b, bin)
		}
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

func buildBinaryB(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "gossipd")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
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
