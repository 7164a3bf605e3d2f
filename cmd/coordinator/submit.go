package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

func init() {
	var f clientFlags
	var wait bool
	c := &cobra.Command{
		Use:   "submit FILE",
		Short: "Submit the jobs in a YAML spec file; --wait shows a progress bar until they end",
		Args:  oneArg("FILE", "the job spec YAML file to submit, e.g. examples/demo.yaml"),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			// The coordinator's own check, run here first on the bytes it
			// will be sent, so that a problem in the file is reported even
			// when it cannot be reached; the coordinator checks again.
			if _, err := workload.ParseSpecsWith(b, actors.SubmitValidateOptions()); err != nil {
				return fmt.Errorf("%s:\n%w", args[0], err)
			}
			nc, err := f.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			// Subscribe before submitting so no event of the new jobs is missed.
			evs := make(chan *nats.Msg, 4096)
			if wait {
				sub, err := nc.ChanSubscribe(transport.AllJobEvents, evs)
				if err != nil {
					return err
				}
				defer func() { _ = sub.Unsubscribe() }()
			}
			var rep actors.SubmitReply
			if err := transport.Request(nc, transport.VerbSubmit, actors.SubmitRequest{YAML: string(b)}, &rep, f.timeout); err != nil {
				return err
			}
			if len(rep.Jobs) == 0 {
				return badReply(transport.VerbSubmit, "no job accepted, and no error")
			}
			for i, j := range rep.Jobs {
				if !actors.ValidJobID(j.ID) {
					return badReply(transport.VerbSubmit, "jobs[%d] has no valid id (%q)", i, j.ID)
				}
			}
			if f.json && !wait {
				return printJSON(rep)
			}
			for _, j := range rep.Jobs {
				if !f.json {
					fmt.Printf("submitted %s (%s)\n", j.ID, j.Name)
				}
			}
			if !wait {
				return nil
			}
			return waitJobs(nc, &f, rep.Jobs, evs)
		},
	}
	addClientFlags(c, &f)
	c.Flags().BoolVar(&wait, "wait", false, "follow the jobs' events with a progress bar until every job ends")
	rootCmd.AddCommand(c)
}

// waitJobs follows job events until every job is terminal. Progress bars
// redraw in place on a terminal; without one (a log file, a pipe) a job's
// line is printed as plain text when its state changes or its bar grows;
// with --json every event is printed.
func waitJobs(nc *nats.Conn, f *clientFlags, jobs []actors.SubmittedJob, evs chan *nats.Msg) error {
	want := map[string]string{}
	order := []string{}
	for _, j := range jobs {
		want[j.ID] = j.Name
		order = append(order, j.ID)
	}
	tty := isTerminal(os.Stdout)
	lines := map[string]string{}
	steps := map[string]string{}   // job id → what its line shows: state, bar cells
	printed := map[string]string{} // without a terminal: the step last printed
	done := map[string]string{}    // job id → its terminal state
	// Jobs may have ended before the subscription saw them, or their
	// terminal event may never arrive (published while the connection was
	// down): ask now, and again on every tick for the jobs not yet done.
	ask := func() {
		for _, id := range order {
			if _, ok := done[id]; ok {
				continue
			}
			var r actors.JobRecord
			if err := transport.Request(nc, transport.VerbStatus, actors.JobRequest{Job: id}, &r, f.timeout); err == nil && r.ID == id && r.State.Terminal() {
				done[id] = string(r.State)
				lines[id] = fmt.Sprintf("%-8s %-20s %s", id, want[id], r.State)
				steps[id] = string(r.State)
			}
		}
	}
	ask()
	drawn := 0
	draw := func() {
		if f.json {
			return
		}
		if !tty {
			for _, id := range order {
				if lines[id] != "" && steps[id] != printed[id] {
					fmt.Println(lines[id])
					printed[id] = steps[id]
				}
			}
			return
		}
		if drawn > 0 {
			fmt.Printf("\x1b[%dA", drawn)
		}
		for _, id := range order {
			l := lines[id]
			if l == "" {
				l = fmt.Sprintf("%-8s %-20s submitted", id, want[id])
			}
			fmt.Printf("\x1b[2K%s\n", l)
		}
		drawn = len(order)
	}
	draw()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for len(done) < len(want) {
		select {
		case m := <-evs:
			e, err := transport.ParseEvent(m.Data)
			if err != nil {
				continue
			}
			// Membership, not the name: a job's name may be empty.
			if _, ok := want[e.Job]; !ok {
				continue
			}
			if f.json {
				_ = printJSON(e)
			}
			lines[e.Job] = formatProgress(e, want[e.Job])
			steps[e.Job] = progressStep(e)
			switch e.Type {
			case transport.EvCompleted, transport.EvCancelled, transport.EvFailed:
				done[e.Job] = e.Type
			}
			draw()
		case <-tick.C:
			if !nc.IsConnected() {
				return fmt.Errorf("lost the connection to NATS at %s", f.natsURL)
			}
			if ask(); len(done) == len(want) {
				draw()
			}
		}
	}
	// Counted from the final states: a job may have ended before the
	// subscription saw it (its state came from the status request), or its
	// terminal event may arrive twice.
	failed := 0
	for _, st := range done {
		if st != transport.EvCompleted {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d job(s) did not complete", failed)
	}
	return nil
}

// isTerminal reports whether f is a terminal (a character device), where
// progress bars can be redrawn in place.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// barWidth is the number of cells in a progress bar.
const barWidth = 24

// barCells is how many of a progress bar's cells are filled.
func barCells(it, total int64) int {
	if total <= 0 {
		return 0
	}
	// Clamped: an event off the network may carry any iteration.
	return int(min(max(float64(barWidth)*float64(it)/float64(total), 0), barWidth))
}

// progressStep is what a job's line shows after e, less the figures that
// change with every progress event: its event type and, for progress, the
// bar's filled cells; with no terminal a line is printed once per step.
func progressStep(e transport.Event) string {
	if e.Type == transport.EvProgress {
		return fmt.Sprintf("%s %d", e.Type, barCells(e.Iteration, e.Total))
	}
	return fmt.Sprintf("%s %d", e.Type, e.Seq)
}

// elasticChange says what an elastic resize changed: "batch 64 → 128 on
// n1/gpu0, n1/gpu1" when only the batch changed, "batch 64, GPUs n1/gpu0 →
// n1/gpu0, n2/gpu0" when only the GPUs did, both arrows when both did.
func elasticChange(e transport.Event) string {
	steps := func(acc int) string {
		if acc > 0 {
			return fmt.Sprintf(" in %d micro-steps", acc+1)
		}
		return ""
	}
	batch := fmt.Sprintf("batch %d%s", e.Batch, steps(e.Accum))
	if e.OldBatch != e.Batch || e.OldAccum != e.Accum {
		batch = fmt.Sprintf("batch %d%s → %d%s", e.OldBatch, steps(e.OldAccum), e.Batch, steps(e.Accum))
	}
	gpus, old := strings.Join(e.GPUIDs, ", "), strings.Join(e.OldGPUIDs, ", ")
	switch {
	case gpus == old:
		return batch + " on " + gpus
	case old == "":
		return batch + ", GPUs → " + gpus
	default:
		return batch + ", GPUs " + old + " → " + gpus
	}
}

func formatProgress(e transport.Event, name string) string {
	bar := func(it, total int64) string {
		n := barCells(it, total)
		return strings.Repeat("█", n) + strings.Repeat("░", barWidth-n)
	}
	s := fmt.Sprintf("%-8s %-20s %-9s", e.Job, name, e.Type)
	switch e.Type {
	case transport.EvPlaced:
		s += fmt.Sprintf(" on %s (needs ≥ %s, vanilla %s)", e.GPU, gib(e.MinBudget), gib(e.VanillaPeak))
	case transport.EvStarted:
		s += fmt.Sprintf(" on %s, budget %s", e.GPU, gib(e.Budget))
	case transport.EvProgress, transport.EvCompleted:
		s += fmt.Sprintf(" %s %d/%d  budget %s  peak %s  swapped %s/iter", bar(e.Iteration, e.Total), e.Iteration, e.Total, gib(e.Budget), gib(e.PeakBytes), gib(e.Swapped))
	case transport.EvResized:
		if len(e.GPUIDs) > 0 || e.Batch > 0 {
			s += " " + elasticChange(e) + ";"
		}
		s += fmt.Sprintf(" budget %s → %s (%s)", gib(e.OldBudget), gib(e.Budget), e.Reason)
	default:
		if e.Reason != "" {
			s += " " + e.Reason
		}
	}
	return s
}
