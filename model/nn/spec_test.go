package nn

import (
	"errors"
	"strings"
	"testing"
)

// TestParse: specs parse to their canonical form (flatten made
// explicit, defaults left out), and bad ones say which layer is wrong.
func TestParse(t *testing.T) {
	for in, want := range map[string]string{
		"conv:32:5,relu,maxpool:2,dense:10,dense":    "conv:32:5,relu,maxpool:2,flatten,dense:10,dense",
		"conv:8:3:1:0, ReLU ,avgpool:2:2,dense":      "conv:8:3,relu,avgpool:2,flatten,dense",
		"conv:8:3:2,groupnorm:2,gelu,flatten,dense":  "conv:8:3:2,groupnorm:2,gelu,flatten,dense",
		"dense:64,layernorm,tanh,dropout:0.25,dense": "dense:64,layernorm,tanh,dropout:0.25,dense",
		"lenet5": Presets["lenet5"],
	} {
		s, err := Parse(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if s.String() != want {
			t.Errorf("%q parsed to %q, want %q", in, s, want)
		}
	}
	for in, want := range map[string]string{
		"":                     "empty",
		"conv:32":              "conv takes 2 to 4 arguments",
		"conv:32:0,dense":      "kernel 0",
		"dense:10":             "last layer",
		"dense,dense":          "only the last layer",
		"dropout:1,dense":      "dropout probability",
		"conv:32:x,dense":      `layer 1 "conv:32:x"`,
		"relu,pool:2,dense":    `unknown kind "pool"`,
		"maxpool:2:3:4,dense":  "maxpool takes 1 to 2 arguments",
		"groupnorm:-1,dense":   "not a whole number",
		"conv:9999999:3,dense": "not a whole number",
	} {
		_, err := Parse(in)
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want ErrSpec saying %q", in, err, want)
		}
	}
}

// TestBuildBounds: a network beyond the bounds is refused before
// anything is allocated.
func TestBuildBounds(t *testing.T) {
	for _, spec := range []string{"flatten,dense:1048576,dense:1048576,dense", "conv:1048576:1,conv:1048576:1,dense", "conv:4096:1001:1:1000,dense"} {
		s, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Build(s, Shape{3, 32, 32}, 10, nil); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "beyond") {
			t.Errorf("%s: %v, want a refusal", spec, err)
		}
	}
}

// FuzzParse: no input panics, and what parses round-trips through its
// canonical form; Build never panics on it either.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"conv:32:5,relu,maxpool:2,dense", "lenet5", "dense:3,gelu,dense", "conv:2:3:2:1,groupnorm:1,dense", "dropout:0.5,dense", ",,", "conv:1:1:1:1:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := Parse(in)
		if err != nil {
			return
		}
		again, err := Parse(s.String())
		if err != nil || again.String() != s.String() {
			t.Fatalf("%q → %q → %q, %v", in, s, again, err)
		}
		if len(s) > 12 {
			return
		}
		for _, l := range s {
			if l.Out > 64 || l.Kernel > 9 || l.Groups > 64 {
				return // Build allocates nothing, but keep the cases small
			}
		}
		Build(s, Shape{2, 9, 9}, 3, nil) // an error or a network, never a panic
	})
}
