package daemon

import (
	"context"

	"golang.org/x/time/rate"
)

// pacer paces sends to Config.SendRate bytes per second.
type pacer struct{ lim *rate.Limiter }

func newPacer(bytesPerSecond float64) *pacer {
	if bytesPerSecond <= 0 {
		return nil
	}
	// A second's worth may go at once; larger frames wait in turns.
	burst := max(int(bytesPerSecond), 1)
	return &pacer{lim: rate.NewLimiter(rate.Limit(bytesPerSecond), burst)}
}

// wait blocks until n bytes may be sent, or ctx ends.
func (p *pacer) wait(ctx context.Context, n int) error {
	if p == nil {
		return nil
	}
	for n > 0 {
		k := min(n, p.lim.Burst())
		if err := p.lim.WaitN(ctx, k); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
