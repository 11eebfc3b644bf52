//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"unsafe"

	"github.com/gossipd/gossipd/model/compute"
)

// graphAPI is the driver's stream-capture, graph and event API: a step's
// kernels, GEMMs and uploads captured on a stream of their own into a
// graph, instantiated once and launched as one call.
type graphAPI struct {
	streamCreate  func(s *uintptr, flags uint32) int32
	streamDestroy func(s uintptr) int32
	beginCapture  func(s uintptr, mode int32) int32
	endCapture    func(s uintptr, graph *uintptr) int32
	instantiate   func(exec *uintptr, graph uintptr, flags uint64) int32
	launch        func(exec uintptr, s uintptr) int32
	destroy       func(graph uintptr) int32
	execDestroy   func(exec uintptr) int32
	eventCreate   func(ev *uintptr, flags uint32) int32
	eventRecord   func(ev uintptr, s uintptr) int32
	eventSync     func(ev uintptr) int32
	eventDestroy  func(ev uintptr) int32
	freeHost      func(p unsafe.Pointer) int32
}

// symbols are the graph API's functions by their names in libcuda.
func (g *graphAPI) symbols() map[string]any {
	return map[string]any{"cuStreamCreate": &g.streamCreate, "cuStreamDestroy_v2": &g.streamDestroy,
		"cuStreamBeginCapture_v2": &g.beginCapture, "cuStreamEndCapture": &g.endCapture,
		"cuGraphInstantiateWithFlags": &g.instantiate, "cuGraphLaunch": &g.launch, "cuGraphDestroy": &g.destroy,
		"cuGraphExecDestroy": &g.execDestroy, "cuEventCreate": &g.eventCreate, "cuEventRecord": &g.eventRecord,
		"cuEventSynchronize": &g.eventSync, "cuEventDestroy_v2": &g.eventDestroy, "cuMemFreeHost": &g.freeHost}
}

// cuda.h's flags.
const (
	streamNonBlocking  = 1 // CU_STREAM_NON_BLOCKING
	captureThreadLocal = 1 // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
	eventNoTiming      = 2 // CU_EVENT_DISABLE_TIMING
)

// graphDepth is how many recordings of a step a StepGraph keeps, used in
// turn: a replay stages its inputs in its own recording's page-locked
// memory after waiting for that recording's previous launch, so the host
// queues up to graphDepth steps ahead of the GPU.
const graphDepth = 4

var _ compute.Graphs = (*Backend)(nil)

// stepGraph is the CUDA compute.StepGraph. Its first Run runs the step
// as usual (its buffers grow to their sizes, and the bytes it uploads
// are counted); the next graphDepth capture it, each on the capture
// stream into a graph of its own, whose uploads read page-locked memory
// of its own; later ones replay them in turn. While a step is captured
// or replayed the backend's driver table is guard: every call that a
// graph cannot hold (a synchronous copy, an allocation, a wait) panics,
// and Run sets the graph aside and runs the step as usual.
type stepGraph struct {
	b        *Backend
	guard    *api
	stream   uintptr
	insts    [graphDepth]recorded
	rec      recording
	calls    int
	replayed int
	staged   uintptr // the page-locked bytes a step's uploads take
	off      string
}

// recorded is one capture of the step: its instantiated graph, the event
// recorded after its last launch, its uploads' page-locked memory and
// the signature of each operation it queued, in order.
type recorded struct {
	exec, ev uintptr
	pinned   unsafe.Pointer
	ops      [][]byte
}

// recording is the backend's state while a step is captured or replayed
// (Backend.rec): the operations seen so far and the next free byte of
// the recording's page-locked memory.
type recording struct {
	inst     *recorded
	replay   bool
	pos      int
	off      uintptr
	capacity uintptr // the bytes at inst.pinned
	sig      []byte
}

// notRecordable is the panic of a call that a recording cannot hold.
type notRecordable string

func (n notRecordable) Error() string {
	return "the step called " + string(n) + ", which a CUDA graph cannot hold"
}

// NewStepGraph implements compute.Graphs.
func (b *Backend) NewStepGraph() compute.StepGraph {
	g := &stepGraph{b: b, off: b.a.noGraph}
	guard := *b.a
	guard.htod = func(uint64, unsafe.Pointer, uintptr) int32 { panic(notRecordable("cuMemcpyHtoD")) }
	guard.dtoh = func(unsafe.Pointer, uint64, uintptr) int32 { panic(notRecordable("cuMemcpyDtoH")) }
	guard.dtod = func(uint64, uint64, uintptr) int32 { panic(notRecordable("cuMemcpyDtoD")) }
	guard.memset32 = func(uint64, uint32, uintptr) int32 { panic(notRecordable("cuMemsetD32")) }
	guard.alloc = func(*uint64, uintptr) int32 { panic(notRecordable("cuMemAlloc")) }
	guard.free = func(uint64) int32 { panic(notRecordable("cuMemFree")) }
	guard.allocHost = func(*unsafe.Pointer, uintptr) int32 { panic(notRecordable("cuMemAllocHost")) }
	guard.syncCtx = func() int32 { panic(notRecordable("cuCtxSynchronize")) }
	g.guard = &guard
	return g
}

// Stats implements compute.StepGraph.
func (g *stepGraph) Stats() (int, string) { return g.replayed, g.off }

// Run implements compute.StepGraph.
func (g *stepGraph) Run(step func()) {
	if g.off != "" {
		step()
		return
	}
	g.calls++
	if g.calls == 1 {
		before := g.b.stage.total
		step()
		g.staged = g.b.stage.total - before
		return
	}
	inst := &g.insts[(g.calls-2)%graphDepth]
	var err error
	if inst.exec == 0 {
		err = g.capture(inst, step)
	} else {
		err = g.replay(inst, step)
	}
	if err != nil {
		g.off = err.Error()
		g.Close()
		step()
	}
}

// capture records step into inst and launches it.
func (g *stepGraph) capture(inst *recorded, step func()) error {
	b, gr := g.b, &g.b.a.graph
	runtime.LockOSThread() // the capture is this thread's (CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
	defer runtime.UnlockOSThread()
	exit := b.enter()
	var err error
	if g.stream == 0 {
		err = b.a.check("cuStreamCreate", gr.streamCreate(&g.stream, streamNonBlocking))
	}
	if err == nil && inst.ev == 0 {
		err = b.a.check("cuEventCreate", gr.eventCreate(&inst.ev, eventNoTiming))
	}
	if err == nil && inst.pinned == nil {
		err = b.a.check("cuMemAllocHost", b.a.allocHost(&inst.pinned, g.pinnedBytes()))
	}
	if err == nil {
		err = b.blasStream(g.stream)
	}
	if err == nil {
		err = b.a.check("cuStreamBeginCapture", gr.beginCapture(g.stream, captureThreadLocal))
	}
	if err != nil {
		b.blasStream(0)
		exit()
		return err
	}
	g.rec = recording{inst: inst, capacity: g.pinnedBytes(), sig: g.rec.sig}
	inst.ops = inst.ops[:0]
	real := b.a
	b.rec, b.stream, b.a = &g.rec, g.stream, g.guard
	exit()
	stepErr := guarded(step)
	exit = b.enter()
	defer exit()
	b.rec, b.stream, b.a = nil, 0, real
	var graph uintptr
	err = b.a.check("cuStreamEndCapture", gr.endCapture(g.stream, &graph))
	if err2 := b.blasStream(0); err == nil {
		err = err2
	}
	if stepErr != nil {
		err = stepErr
	}
	if err == nil {
		err = b.a.check("cuGraphInstantiateWithFlags", gr.instantiate(&inst.exec, graph, 0))
	}
	if graph != 0 {
		gr.destroy(graph)
	}
	if err != nil {
		return fmt.Errorf("cuda: capturing a training step: %w", err)
	}
	return g.launch(inst)
}

// replay stages step's inputs in inst and launches it.
func (g *stepGraph) replay(inst *recorded, step func()) error {
	b := g.b
	real := b.a
	func() {
		defer b.enter()() // a failed wait panics with the backend released
		// inst's previous launch has read its page-locked memory.
		b.must("cuEventSynchronize", b.a.graph.eventSync(inst.ev))
		g.rec = recording{inst: inst, replay: true, capacity: g.pinnedBytes(), sig: g.rec.sig}
		b.rec, b.a = &g.rec, g.guard
	}()
	err := guarded(step)
	defer b.enter()()
	b.rec, b.a = nil, real
	if err == nil && g.rec.pos != len(inst.ops) {
		err = fmt.Errorf("the step queued %d operations, its recording %d", g.rec.pos, len(inst.ops))
	}
	if err != nil {
		return fmt.Errorf("cuda: replaying a training step: %w", err)
	}
	g.replayed++
	return g.launch(inst)
}

// launch launches inst's graph in the stream everything else goes to,
// and records its event after it. The caller holds the backend.
func (g *stepGraph) launch(inst *recorded) error {
	gr := &g.b.a.graph
	if err := g.b.a.check("cuGraphLaunch", gr.launch(inst.exec, 0)); err != nil {
		return err
	}
	return g.b.a.check("cuEventRecord", gr.eventRecord(inst.ev, 0))
}

// Close implements compute.StepGraph: it waits for the recordings'
// launches and frees them.
func (g *stepGraph) Close() {
	b := g.b
	gr := &b.a.graph
	defer b.enter()()
	for i := range g.insts {
		inst := &g.insts[i]
		if inst.ev != 0 {
			b.must("cuEventSynchronize", gr.eventSync(inst.ev))
			b.must("cuEventDestroy", gr.eventDestroy(inst.ev))
		}
		if inst.exec != 0 {
			b.must("cuGraphExecDestroy", gr.execDestroy(inst.exec))
		}
		if inst.pinned != nil {
			b.must("cuMemFreeHost", gr.freeHost(inst.pinned))
		}
		*inst = recorded{}
	}
	if g.stream != 0 {
		b.must("cuStreamDestroy", gr.streamDestroy(g.stream))
		g.stream = 0
	}
	if g.off == "" {
		g.off = "closed"
	}
}

// pinnedBytes is the page-locked memory of each recording.
func (g *stepGraph) pinnedBytes() uintptr { return max(g.staged, 256) }

// guarded runs step, its panic an error.
func guarded(step func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok {
				err = e
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	step()
	return nil
}

// blasStream sends cuBLAS's GEMMs to stream s, working in the backend's
// workspace.
func (b *Backend) blasStream(s uintptr) error {
	if r := b.blas.setStream(b.bh, s); r != 0 {
		return fmt.Errorf("cublasSetStream: status %d", r)
	}
	return b.useWorkspace()
}

// note notes an operation of a recorded step, whose signature sig was
// appended to r.sig[:0]: captured, it is added to the recording, to be
// queued (note returns false); replayed, it must be the recording's
// next, and is not queued (true).
func (r *recording) note(sig []byte) bool {
	r.sig = sig
	if !r.replay {
		r.inst.ops = append(r.inst.ops, bytes.Clone(sig))
		return false
	}
	if r.pos >= len(r.inst.ops) || !bytes.Equal(r.inst.ops[r.pos], sig) {
		panic(fmt.Errorf("operation %d of the step differs from its recording", r.pos))
	}
	r.pos++
	return true
}

// slot returns n bytes of the recording's page-locked memory for the
// next upload.
func (r *recording) slot(n uintptr) []byte {
	if r.off+n > r.capacity {
		panic(fmt.Errorf("the step uploads more than the %d bytes its first run did", r.capacity))
	}
	buf := unsafe.Slice((*byte)(unsafe.Add(r.inst.pinned, r.off)), n)
	r.off += (n + 255) &^ 255
	return buf
}

// appendU64 appends the signature fields v.
func appendU64(s []byte, v ...uint64) []byte {
	for _, x := range v {
		s = binary.LittleEndian.AppendUint64(s, x)
	}
	return s
}

// f32 is a float's bits, for signatures.
func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }
