package privacy

import (
	"errors"
	"math"
	"testing"
)

// TestConfigValidate: a config that sets any of clip, noise or budget is
// DP-SGD, and then needs all of it valid; a negative or NaN value is an
// error, never DP-SGD silently off.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		c       Config
		enabled bool
		ok      bool
	}{
		{Config{}, false, true},
		{Config{Delta: 1e-5}, false, true}, // δ alone: its default restated, DP-SGD off
		{Config{Clip: 1, Noise: 1}, true, true},
		{Config{Clip: 1, Noise: 1, Epsilon: 3, Delta: 1e-6}, true, true},
		{Config{Clip: -1, Noise: -1}, true, false},
		{Config{Clip: -1}, true, false},
		{Config{Noise: -0.5}, true, false},
		{Config{Epsilon: -1}, true, false},
		{Config{Epsilon: 3}, true, false},
		{Config{Clip: math.NaN(), Noise: 1}, true, false},
		{Config{Clip: 1, Noise: 1, Delta: 1.5}, true, false},
		{Config{Clip: 1, Noise: 1, Epsilon: math.Inf(1)}, true, false},
	} {
		if got := tc.c.Enabled(); got != tc.enabled {
			t.Errorf("%+v: Enabled %v, want %v", tc.c, got, tc.enabled)
		}
		err := tc.c.Validate()
		if (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrParams) {
			t.Errorf("%+v: Validate %v, want ok %v", tc.c, err, tc.ok)
		}
	}
}
