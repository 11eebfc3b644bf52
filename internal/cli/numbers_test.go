package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func numbersSet() (*flag.FlagSet, Bounds) {
	fs := NewFlagSet("t", "t", io.Discard)
	fs.Int("epochs", 20, "")
	fs.Int("threads", 0, "")
	fs.Float64("lr", 0, "")
	fs.Float64("momentum", 0, "")
	fs.Float64("rate", 5, "")
	fs.Float64("limit", 5, "")
	fs.Uint64("seed", 1, "")
	fs.Duration("delta", time.Second, "")
	fs.String("name", "x", "")
	fs.Bool("quiet", false, "")
	return fs, Bounds{"epochs": "[1,inf)", "threads": "[0,inf)", "lr": "(0,inf)", "momentum": "[0,1)",
		"rate": "(-inf,inf)", "limit": "(-inf,0)|(0,inf)", "seed": "[0,inf)", "delta": "(0,inf)"}
}

func TestCheckNumbers(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // "" for no error
	}{
		{nil, ""},
		{[]string{"--epochs", "1", "--threads", "0", "--lr", "0.5", "--momentum", "0", "--delta", "1ms", "--rate", "-3"}, ""},
		{[]string{"--epochs", "0"}, "--epochs 0: want at least 1"},
		{[]string{"--epochs", "-2"}, "--epochs -2: want at least 1"},
		{[]string{"--threads", "-1"}, "--threads -1: want at least 0"},
		{[]string{"--lr", "0"}, "--lr 0: want more than 0"},
		{[]string{"--lr", "NaN"}, "--lr NaN: want a finite number"},
		{[]string{"--rate", "+Inf"}, "--rate +Inf: want a finite number"},
		{[]string{"--momentum", "1"}, "--momentum 1: want a value in [0, 1)"},
		{[]string{"--limit", "-1"}, ""},
		{[]string{"--limit", "0"}, "--limit 0: want less than 0 or more than 0"},
		{[]string{"--delta", "0s"}, "--delta 0s: want more than 0s"},
		{[]string{"--delta", "-1s", "--epochs", "0"}, "--delta -1s: want more than 0s; --epochs 0: want at least 1"},
	} {
		fs, b := numbersSet()
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := CheckNumbers(fs, b)
		if tc.want == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.args, err)
			}
			continue
		}
		if !errors.Is(err, ErrUsage) || !strings.HasSuffix(err.Error(), ": "+tc.want) {
			t.Errorf("%v: got %v, want a usage error ending %q", tc.args, err, tc.want)
		}
	}
}

// A flag at its default is not checked: lr's 0 is the sentinel "the
// optimizer's default", refused only when given.
func TestCheckNumbersDefaults(t *testing.T) {
	fs, b := numbersSet()
	if err := CheckNumbers(fs, b); err != nil {
		t.Fatal(err)
	}
	if err := fs.Set("lr", "0"); err != nil {
		t.Fatal(err)
	}
	if err := CheckNumbers(fs, b); err == nil {
		t.Fatal("--lr 0 set explicitly passed")
	}
}

func TestCheckNumbersProgrammingErrors(t *testing.T) {
	for name, edit := range map[string]func(Bounds){
		"a numeric flag without a bound": func(b Bounds) { delete(b, "lr") },
		"a bound for no flag":            func(b Bounds) { b["nope"] = "[0,1]" },
		"a bound for a string flag":      func(b Bounds) { b["name"] = "[0,1]" },
		"a malformed bound":              func(b Bounds) { b["lr"] = "0..1" },
		"a malformed union":              func(b Bounds) { b["lr"] = "(0,1)|" },
		"an empty bound":                 func(b Bounds) { b["lr"] = "[1,0]" },
		"a bound closed at infinity":     func(b Bounds) { b["lr"] = "[0,inf]" },
	} {
		t.Run(name, func(t *testing.T) {
			fs, b := numbersSet()
			edit(b)
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			_ = CheckNumbers(fs, b)
		})
	}
}
