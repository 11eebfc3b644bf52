package central

import (
	"fmt"
	"io"
)

// WriteText writes the report as `gossipd train` prints it.
func (r *Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "model       %s (%d parameters)\n", r.Spec, r.Params)
	fmt.Fprintf(w, "dataset     %s: %d train, %d test examples\n", r.Dataset, r.TrainExamples, r.TestExamples)
	fmt.Fprintf(w, "training    %d epochs, batch %d, %s, seed %d on %s\n", r.Epochs, r.Batch, r.Optimizer, r.Seed, r.Backend)
	if r.Device.Note != "" {
		fmt.Fprintf(w, "device      %s (--device %s): %s\n", r.Device.Device, r.Device.Requested, r.Device.Note)
	}
	if r.Device.Libraries != "" {
		fmt.Fprintf(w, "libraries   %s\n", r.Device.Libraries)
	}
	fmt.Fprintf(w, "speed       %.0f samples/s (%.2f s)\n", r.SamplesPerSecond, r.TrainSeconds)
	if r.DevicePeakBytes > 0 {
		fmt.Fprintf(w, "device      memory peak %.1f MiB (the backend's tensors and buffers)\n", float64(r.DevicePeakBytes)/(1<<20))
	}
	if g := r.Graphs; g != nil {
		fmt.Fprintf(w, "graphs      %s\n", g)
	}
	fmt.Fprintf(w, "train loss  %.4f\n", r.TrainLoss)
	fmt.Fprintf(w, "test        accuracy %.4f, loss %.4f\n", r.TestAccuracy, r.TestLoss)
	if len(r.Confusion) <= 20 {
		fmt.Fprintf(w, "confusion   (rows: true class, columns: predicted)\n")
		fmt.Fprintf(w, "%8s", "")
		for j := range r.Confusion {
			fmt.Fprintf(w, "%6d", j)
		}
		fmt.Fprintln(w)
		for i, row := range r.Confusion {
			fmt.Fprintf(w, "%8d", i)
			for _, v := range row {
				fmt.Fprintf(w, "%6d", v)
			}
			fmt.Fprintln(w)
		}
	}
}
