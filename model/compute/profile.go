package compute

import (
	"cmp"
	"slices"
	"time"
)

// A Profiler is a device backend that can time its calls one at a time:
// the device idle before each call starts and waited for after it, so
// that a call's time is its own work on the device with the host's share
// of it. A profile says where a run's device time goes (which kernels,
// GEMMs and copies); the run itself is slower, since the host no longer
// queues work while the device computes.
type Profiler interface {
	// Profile starts timing the calls.
	Profile()
	// Profiled returns the time of the calls of each name so far, the
	// longest first.
	Profiled() []CallTime
}

// CallTime is the time a device backend's calls of one name took
// (Profiler): Seconds from each call's start to the device's end of its
// work, HostSeconds until each returned to its caller (queueing its work,
// and any copy it waited for).
type CallTime struct {
	Name        string  `json:"name"`
	Calls       uint64  `json:"calls"`
	Seconds     float64 `json:"seconds"`
	HostSeconds float64 `json:"host_seconds"`
}

// CallTimes adds up the times of calls by name, for a Profiler. Its zero
// value is empty and ready. It is not safe for concurrent use: a
// Profiler serialises its calls, and its updates with them.
type CallTimes struct {
	by map[string]*CallTime
}

// Add counts one call of name that took total, host of it on the host.
func (c *CallTimes) Add(name string, total, host time.Duration) {
	if c.by == nil {
		c.by = map[string]*CallTime{}
	}
	t := c.by[name]
	if t == nil {
		t = &CallTime{Name: name}
		c.by[name] = t
	}
	t.Calls++
	t.Seconds += total.Seconds()
	t.HostSeconds += host.Seconds()
}

// List returns the times by name, the longest first (ties by name).
func (c *CallTimes) List() []CallTime {
	out := make([]CallTime, 0, len(c.by))
	for _, t := range c.by {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b CallTime) int {
		if d := cmp.Compare(b.Seconds, a.Seconds); d != 0 {
			return d
		}
		return cmp.Compare(a.Name, b.Name)
	})
	return out
}
