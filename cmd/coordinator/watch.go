package main

import (
	"fmt"
	"os"
	"os/signal"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/transport"
)

func init() {
	var f clientFlags
	var job string
	c := &cobra.Command{
		Use:   "watch",
		Short: "Print job and node events as they happen (--job ID for one job)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			subj := transport.AllEvents
			if job != "" {
				if !actors.ValidJobID(job) {
					return fmt.Errorf("bad job id %q (ids look like j-12)", job)
				}
				subj = transport.JobEventsPrefix + job
			}
			nc, err := f.connect()
			if err != nil {
				return err
			}
			defer nc.Close()
			ch := make(chan *nats.Msg, 1024)
			sub, err := nc.ChanSubscribe(subj, ch)
			if err != nil {
				return err
			}
			defer func() { _ = sub.Unsubscribe() }()
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, os.Interrupt)
			for {
				select {
				case m := <-ch:
					e, err := transport.ParseEvent(m.Data)
					if err != nil {
						fmt.Fprintf(os.Stderr, "watch: skipping a message on %s that is not an event: %v\n", m.Subject, err)
						continue
					}
					if f.json {
						fmt.Println(string(m.Data))
						continue
					}
					if e.Job != "" {
						fmt.Printf("%s #%d %s\n", e.Time.Format("15:04:05.000"), e.Seq, watchJobLine(e))
					} else {
						fmt.Printf("%s #%d node %s %s %s\n", e.Time.Format("15:04:05.000"), e.Seq, e.Node, e.Type, e.Address)
					}
				case <-sig:
					return nil
				}
			}
		},
	}
	addClientFlags(c, &f)
	c.Flags().StringVar(&job, "job", "", "only this job's events")
	rootCmd.AddCommand(c)
}

// watchJobLine is a job event's line: formatProgress's, and for a refused
// elastic change the GPUs it asked for (a resized event's line names them
// already).
func watchJobLine(e transport.Event) string {
	line := formatProgress(e, e.Name)
	if len(e.GPUIDs) > 0 && e.Type != transport.EvResized {
		line += " [" + elasticChange(e) + "]"
	}
	return line
}
