package bench

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gossipd/gossipd/internal/cli"
	"github.com/gossipd/gossipd/model/compute"
)

// TestSimReadsJSON: the sim part reads each run's final accuracy from its
// `simulate --json` summary, never from the human output (a stand-in
// binary prints a wrong figure there), once with the kernels in use and
// once with the pure-Go ones.
func TestSimReadsJSON(t *testing.T) {
	self := filepath.Join(t.TempDir(), "gossipd")
	script := "#!/bin/sh\n[ \"$1\" = simulate ] || exit 3\n" +
		"case \" $* \" in *\" --json \"*) ;; *) echo 'final accuracy 0.1111'; exit 0;; esac\n" +
		"acc=0.8123; [ \"$" + compute.KernelEnv + "\" = go ] && acc=0.7000\n" +
		"echo '{\"protocol\":\"randomwalk\",\"peers\":2,\"final_accuracy\":'$acc',\"device\":{\"device\":\"cpu\"}}'\n"
	if err := os.WriteFile(self, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := Sim(context.Background(), &out, io.Discard, self, "digits"); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, l := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(l); len(f) == 6 && strings.Contains(f[0], "×") && f[2] == "0.8123" && f[4] == "0.7000" {
			rows++
		}
	}
	if rows != 2 || strings.Contains(out.String(), "0.1111") {
		t.Fatalf("want 2 rows with the JSON's accuracies (0.8123 with the kernels, 0.7000 pure-Go):\n%s", out.String())
	}
}

// TestCheckRefuses: an unknown part, and a flag for none of the parts
// measured, are usage errors naming them.
func TestCheckRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--what", "gemm,foo"}, `--what "foo"`},
		{[]string{"--what", "gemm", "--seeds", "2"}, "--seeds applies to --what train, not to --what gemm"},
		{[]string{"--what", "train", "--python", "py"}, "--python runs the PyTorch reference"},
	} {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		var cfg Config
		cfg.Register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if err := cfg.Check(fs); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a usage error with %q", c.args, err, c.want)
		}
	}
}
