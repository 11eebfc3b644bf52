package daemon

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteJobs prints jobs as `gossipd jobs` does: a table, or a line that
// says there are none.
func WriteJobs(w io.Writer, jobs []AnnouncedJob) error {
	if len(jobs) == 0 {
		_, err := fmt.Fprintln(w, "no jobs announced")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tNAME\tPROTOCOL\tMODEL\tMEMBERS\tBEST ACC\tJOINABLE")
	for _, j := range jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%.4f\t%v\n", j.JobID, j.Name, j.Protocol, j.Model, j.MembersSeen, j.BestAccuracy, j.Joinable)
	}
	return tw.Flush()
}
