package privacy

import "testing"

// TestAddedNoise: with distributed DP a node adds σ/√Shares; alone, σ.
func TestAddedNoise(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want float64
	}{
		{Config{Clip: 1, Noise: 2}, 2},
		{Config{Clip: 1, Noise: 2, Shares: 1}, 2},
		{Config{Clip: 1, Noise: 2, Shares: 4}, 1},
		{Config{Clip: 1, Noise: 3, Shares: 9}, 1},
	} {
		if got := c.cfg.AddedNoise(); got != c.want {
			t.Errorf("%+v: added noise %v, want %v", c.cfg, got, c.want)
		}
	}
	bad := Config{Clip: 1, Noise: 1, Shares: -1}
	if err := bad.Validate(); err == nil {
		t.Error("negative shares accepted")
	}
}
