package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gossipd/gossipd/daemon/transport"
	"github.com/gossipd/gossipd/job"
)

// CheckJobID reports whether id can name a job for FindJob: a job ID or
// a prefix of at least 8 of its hex digits (either case).
func CheckJobID(id string) error {
	if len(id) < 8 || strings.Trim(strings.ToLower(id), "0123456789abcdef") != "" {
		return fmt.Errorf("daemon: job ID %q: want its hex digits (at least 8)", id)
	}
	return nil
}

// FindJob waits (at most timeout) for an announcement of the job whose ID
// (or a unique prefix of at least 8 hex digits) is id, and returns its
// spec and the announcement, for `gossipd run --join`. The transport has
// checked that the spec hashes to the job ID and that its creator signed
// it; FindJob checks that this version of gossipd reads it whole.
func FindJob(ctx context.Context, b transport.Broadcaster, id string, timeout time.Duration) (job.Spec, *transport.Announcement, error) {
	id = strings.ToLower(id)
	if err := CheckJobID(id); err != nil {
		return job.Spec{}, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var seen []string
	for {
		seen = seen[:0]
		var match *transport.Announcement
		for _, a := range b.Announcements() {
			seen = append(seen, a.JobID[:min(12, len(a.JobID))])
			if !strings.HasPrefix(a.JobID, id) || len(a.Spec) == 0 || a.Leaving {
				continue
			}
			if match != nil && match.JobID != a.JobID {
				return job.Spec{}, nil, fmt.Errorf("daemon: job ID prefix %q matches jobs %.12s and %.12s: give more digits", id, match.JobID, a.JobID)
			}
			a := a
			match = &a
		}
		if match != nil {
			spec, err := job.ParseSpec(match.Spec)
			if err != nil {
				return job.Spec{}, nil, fmt.Errorf("daemon: announcement of job %.12s by %s: %w", match.JobID, match.Peer, err)
			}
			return spec, match, nil
		}
		select {
		case <-ctx.Done():
			if len(seen) == 0 {
				return job.Spec{}, nil, fmt.Errorf("daemon: no announcement of job %s within %v, and none of any job: are the bootstrap peers reachable, and in the same network (consortium key)?", id, timeout)
			}
			return job.Spec{}, nil, fmt.Errorf("daemon: no announcement of job %s within %v; heard jobs %s", id, timeout, strings.Join(seen, ", "))
		case <-tick.C:
		}
	}
}
