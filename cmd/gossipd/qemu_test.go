//go:build qemu

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestCrossArch builds gossipd for linux/arm64 and linux/arm (ARMv7, the
// edge boards gossipd is for) and runs each under qemu-user (`make qemu`,
// in `make test`; Debian's qemu-user-static): training on digits, and a
// two-node exchange on 127.0.0.1 in which both peers learn from each
// other. Emulation checks that the binaries work, not how fast they are.
func TestCrossArch(t *testing.T) {
	for _, arch := range []struct{ goarch, goarm, qemu string }{
		{"arm64", "", "qemu-aarch64-static"},
		{"arm", "7", "qemu-arm-static"},
	} {
		t.Run(arch.goarch, func(t *testing.T) {
			qemu, err := exec.LookPath(arch.qemu)
			if err != nil {
				t.Fatalf("%s: %v (apt-get install qemu-user-static)", arch.qemu, err)
			}
			dir := t.TempDir()
			bin := filepath.Join(dir, "gossipd-"+arch.goarch)
			// The Makefile's ARMFLAGS: make cross has built these packages.
			build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, ".")
			build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch.goarch, "GOARM="+arch.goarm)
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			st, err := os.Stat(bin)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("linux/%s%s binary: %.1f MB (stripped)", arch.goarch, map[bool]string{true: "v" + arch.goarm}[arch.goarm != ""], float64(st.Size())/1e6)
			// The daemon helpers run a program: a wrapper runs the binary
			// under qemu.
			wrapper := filepath.Join(dir, "gossipd")
			if err := os.WriteFile(wrapper, fmt.Appendf(nil, "#!/bin/sh\nexec %s %s \"$@\"\n", qemu, bin), 0o755); err != nil {
				t.Fatal(err)
			}

			out, err := exec.Command(wrapper, "train", "--dataset", "digits", "--epochs", "10", "--json").Output()
			if err != nil {
				t.Fatalf("train under %s: %v", arch.qemu, err)
			}
			var res struct {
				Accuracy float64 `json:"test_accuracy"`
			}
			if err := json.Unmarshal(out, &res); err != nil || res.Accuracy < 0.9 {
				t.Fatalf("train under %s: accuracy %.3f (%v)", arch.qemu, res.Accuracy, err)
			}

			ds := startCluster(t, wrapper, dir, 2, "200ms")
			for _, d := range ds {
				poll(t, d, "a peer, its models and accuracy ≥ 0.85", 120*time.Second, func(s status) bool {
					return s.Peers == 1 && s.MessagesIn >= 5 && s.Accuracy >= 0.85
				})
			}
			stopAll(t, ds, nil)
		})
	}
}
