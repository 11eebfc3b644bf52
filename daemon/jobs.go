package daemon

import (
	"slices"
	"strings"
	"time"

	"github.com/gossipd/gossipd/daemon/transport"
)

// AnnouncedJob is a job as its announcements describe it: what `gossipd
// jobs` and /jobs list.
type AnnouncedJob struct {
	JobID    string `json:"job_id"`
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Model    string `json:"model"`
	// Creator is the peer that created the job and signed its spec.
	Creator string `json:"creator,omitempty"`
	// MembersSeen counts the peers heard announcing the job within the
	// live timeout, not leaving (and this node, if it runs the job).
	MembersSeen int `json:"members_seen"`
	// BestAccuracy is the highest test accuracy a member reported.
	BestAccuracy float64 `json:"best_accuracy"`
	// Joinable says an announcement carries the job's signed spec, so
	// that `gossipd run --join` can join it.
	Joinable bool `json:"joinable"`
	// Peers are the members seen, sorted.
	Peers []string `json:"peers"`
	// LastHeard is the newest announcement's arrival.
	LastHeard time.Time `json:"last_heard"`
}

// SummarizeJobs groups announcements by job: the peers that announced it
// within liveTimeout of now and are not leaving count as its members.
// Jobs are sorted by members seen, then ID.
func SummarizeJobs(anns []transport.Announcement, now time.Time, liveTimeout time.Duration) []AnnouncedJob {
	byID := map[string]*AnnouncedJob{}
	for _, a := range anns {
		j := byID[a.JobID]
		if j == nil {
			j = &AnnouncedJob{JobID: a.JobID, Name: a.Name, Protocol: a.Protocol, Model: a.Model, Peers: []string{}}
			byID[a.JobID] = j
		}
		if len(a.Spec) > 0 {
			j.Joinable, j.Creator = true, string(a.Creator)
		}
		if a.Heard.After(j.LastHeard) {
			j.LastHeard = a.Heard
		}
		if a.Leaving || !a.Live(now, liveTimeout) {
			continue
		}
		j.Peers = append(j.Peers, string(a.Peer))
		j.BestAccuracy = max(j.BestAccuracy, a.Accuracy)
	}
	out := make([]AnnouncedJob, 0, len(byID))
	for _, j := range byID {
		slices.Sort(j.Peers)
		j.Peers = slices.Compact(j.Peers)
		j.MembersSeen = len(j.Peers)
		out = append(out, *j)
	}
	slices.SortFunc(out, func(a, b AnnouncedJob) int {
		if a.MembersSeen != b.MembersSeen {
			return b.MembersSeen - a.MembersSeen
		}
		return strings.Compare(a.JobID, b.JobID)
	})
	return out
}

// Jobs lists the jobs this node has heard announced, its own included
// (with itself among the members).
func (n *Node) Jobs() []AnnouncedJob {
	anns := n.Announcements()
	anns = append(anns, n.announcement(false))
	anns[len(anns)-1].Peer, anns[len(anns)-1].Heard = n.cfg.Transport.ID(), n.cfg.Now()
	return SummarizeJobs(anns, n.cfg.Now(), n.cfg.LiveTimeout)
}
