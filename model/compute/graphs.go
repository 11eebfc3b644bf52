package compute

// Graphs is implemented by device backends that can record the work one
// training step queues and replay it (CUDA graphs): on a GPU a small
// step's time goes to the host queueing its kernels one by one, where a
// replay queues them all with one call.
type Graphs interface {
	// NewStepGraph returns a StepGraph on the backend.
	NewStepGraph() StepGraph
}

// StepGraph records a step and replays it. Its Run runs a function that
// queues a training step's work on the backend, the same work each time
// but for the small host inputs it uploads (a minibatch's row indices and
// labels): the first calls run it and record what it queues, later calls
// run its Go code again only to stage those inputs, and replay the
// recording. A step that does anything else (reads a result on the host,
// queues other work) is run as usual, and the graph is set aside for the
// rest of its life (Stats says why); so is one whose recording the
// device refuses. Nothing else may use the backend while Run runs.
type StepGraph interface {
	Run(step func())
	// Stats says how many steps were replayed, and why the graph is no
	// longer used ("" while it is).
	Stats() (replayed int, off string)
	// Close frees the recordings.
	Close()
}
