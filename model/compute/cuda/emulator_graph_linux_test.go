//go:build cuda && linux && (amd64 || arm64)

package cuda

import (
	"runtime/debug"
	"slices"
	"unsafe"
)

// graphEmu is the emulated driver's streams, stream capture, graphs and
// events. A capture collects the operations submitted to its stream in
// place of queueing them, with their arguments as they were then (a
// kernel's parameters, a GEMM's α and β); an upload in it reads its host
// memory when a launch of the graph runs it, as on a GPU. A launch queues
// the graph's operations on the context's stream. An event is done when
// the stream has run the operations queued before it was recorded, and
// waiting for it runs the queue that far and no further.
type graphEmu struct {
	handles    uintptr
	streams    map[uintptr]bool
	capStream  uintptr // the stream that captures, if any
	capOps     []func() int32
	blasStream uintptr
	graphs     map[uintptr][]func() int32
	execs      map[uintptr][]func() int32
	recorded   map[uintptr]int // an event's records
	reached    map[uintptr]int // the last of them the stream has run
	// failCapture, if not 0, is what the next cuStreamEndCapture
	// returns, as a driver that invalidated the capture.
	failCapture int32
	// failWait, if not 0, is what cuEventSynchronize returns, as a
	// device that failed.
	failWait int32
	// launches counts the graph launches, kernelCalls the calls of
	// cuLaunchKernel.
	launches, kernelCalls int
	// blasWorkspace is the device memory cuBLAS works in, given by
	// cublasSetWorkspace (0: cuBLAS's own pool, as after every
	// cublasSetStream). noWorkspaceAPI emulates a cuBLAS without
	// cublasSetWorkspace.
	blasWorkspace  uint64
	noWorkspaceAPI bool
}

// submit queues op on stream, or adds it to the capture of that stream.
func (e *emulator) submit(stream uintptr, op func() int32) int32 {
	switch {
	case e.capStream != 0 && stream == e.capStream:
		e.capOps = append(e.capOps, op)
		return 0
	case e.capStream != 0:
		e.t.Errorf("emulator: an operation on stream %#x while stream %#x captures: it would run now, outside the graph\n%s", stream, e.capStream, debug.Stack())
		return 906 // CUDA_ERROR_CAPTURED_EVENT... (an operation the capture does not hold)
	case stream != 0:
		e.t.Errorf("emulator: an operation on stream %#x outside a capture: the backend queues its work on the context's stream", stream)
		return 400
	}
	return e.enqueue(op)
}

func (e *emulator) handle() uintptr {
	e.handles++
	return 0x50000 + e.handles
}

// graphAPI returns the emulated graph and event API.
func (e *emulator) graphAPI() graphAPI {
	e.streams, e.graphs, e.execs = map[uintptr]bool{}, map[uintptr][]func() int32{}, map[uintptr][]func() int32{}
	e.recorded, e.reached = map[uintptr]int{}, map[uintptr]int{}
	var g graphAPI
	g.streamCreate = func(s *uintptr, flags uint32) int32 {
		if flags != streamNonBlocking {
			e.t.Errorf("emulator: a stream with flags %d: a blocking stream waits for the context's", flags)
		}
		*s = e.handle()
		e.streams[*s] = true
		return 0
	}
	g.streamDestroy = func(s uintptr) int32 {
		if !e.streams[s] || s == e.capStream {
			e.t.Errorf("emulator: cuStreamDestroy of %#x", s)
			return 400 // CUDA_ERROR_INVALID_HANDLE
		}
		delete(e.streams, s)
		return 0
	}
	g.beginCapture = func(s uintptr, mode int32) int32 {
		if !e.streams[s] || e.capStream != 0 || mode != captureThreadLocal {
			e.t.Errorf("emulator: cuStreamBeginCapture of %#x (mode %d) while %#x captures", s, mode, e.capStream)
			return 1
		}
		e.capStream, e.capOps = s, nil
		return 0
	}
	g.endCapture = func(s uintptr, graph *uintptr) int32 {
		if s != e.capStream {
			e.t.Errorf("emulator: cuStreamEndCapture of %#x, which does not capture", s)
			return 1
		}
		ops := e.capOps
		e.capStream, e.capOps = 0, nil
		if r := e.failCapture; r != 0 {
			e.failCapture = 0
			*graph = 0
			return r
		}
		*graph = e.handle()
		e.graphs[*graph] = ops
		return 0
	}
	g.instantiate = func(exec *uintptr, graph uintptr, _ uint64) int32 {
		ops, ok := e.graphs[graph]
		if !ok {
			e.t.Errorf("emulator: cuGraphInstantiate of %#x, not a graph", graph)
			return 400
		}
		*exec = e.handle()
		e.execs[*exec] = slices.Clone(ops)
		return 0
	}
	g.launch = func(exec, s uintptr) int32 {
		ops, ok := e.execs[exec]
		if !ok {
			e.t.Errorf("emulator: cuGraphLaunch of %#x, not an instantiated graph", exec)
			return 400
		}
		e.launches++
		for _, op := range ops {
			if r := e.submit(s, op); r != 0 {
				return r
			}
		}
		return 0
	}
	drop := func(call string, m map[uintptr][]func() int32) func(uintptr) int32 {
		return func(h uintptr) int32 {
			if _, ok := m[h]; !ok {
				e.t.Errorf("emulator: %s of %#x", call, h)
				return 400
			}
			delete(m, h)
			return 0
		}
	}
	g.destroy, g.execDestroy = drop("cuGraphDestroy", e.graphs), drop("cuGraphExecDestroy", e.execs)
	g.eventCreate = func(ev *uintptr, _ uint32) int32 {
		*ev = e.handle()
		e.recorded[*ev], e.reached[*ev] = 0, 0
		return 0
	}
	g.eventRecord = func(ev, s uintptr) int32 {
		if _, ok := e.recorded[ev]; !ok {
			e.t.Errorf("emulator: cuEventRecord of %#x, not an event", ev)
			return 400
		}
		e.recorded[ev]++
		n := e.recorded[ev]
		return e.submit(s, func() int32 { e.reached[ev] = n; return 0 })
	}
	g.eventSync = func(ev uintptr) int32 {
		if _, ok := e.recorded[ev]; !ok {
			e.t.Errorf("emulator: cuEventSynchronize of %#x, not an event", ev)
			return 400
		}
		if e.capStream != 0 {
			e.t.Errorf("emulator: the host waits for an event while stream %#x captures", e.capStream)
			return 900
		}
		if e.failWait != 0 {
			return e.failWait
		}
		if e.reached[ev] < e.recorded[ev] {
			e.syncs++
		}
		for e.reached[ev] < e.recorded[ev] && len(e.queue) > 0 {
			op := e.queue[0]
			e.queue = e.queue[1:]
			if r := op(); r != 0 {
				return r
			}
		}
		return 0
	}
	g.eventDestroy = func(ev uintptr) int32 {
		delete(e.recorded, ev)
		delete(e.reached, ev)
		return 0
	}
	g.freeHost = func(p unsafe.Pointer) int32 {
		for i, b := range e.pinned {
			if unsafe.Pointer(&b[0]) == p {
				e.pinned = slices.Delete(e.pinned, i, i+1)
				return 0
			}
		}
		e.t.Errorf("emulator: cuMemFreeHost of %p, not page-locked memory", p)
		return 1
	}
	return g
}
