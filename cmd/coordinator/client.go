package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/cobra"

	"github.com/gpusched/gpusched/actors"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/transport"
)

// clientFlags are shared by the commands that talk to a coordinator over NATS.
type clientFlags struct {
	natsURL string
	token   string
	json    bool
	timeout time.Duration
}

func addClientFlags(c *cobra.Command, f *clientFlags) {
	def := os.Getenv("GPUSCHED_NATS_URL")
	if def == "" {
		def = transport.DefaultNATSURL
	}
	c.Flags().StringVar(&f.natsURL, "nats-url", def, "NATS server of the coordinator (env GPUSCHED_NATS_URL)")
	c.Flags().StringVar(&f.token, "nats-token", os.Getenv(transport.NATSTokenEnv), "token of the coordinator's NATS server (serve --nats-token; env "+transport.NATSTokenEnv+", preferred: other users cannot read it in the process list)")
	c.Flags().BoolVar(&f.json, "json", false, "print JSON instead of text")
	c.Flags().DurationVar(&f.timeout, "timeout", 10*time.Second, "how long to wait for the coordinator's answer")
}

func (f *clientFlags) connect() (*nats.Conn, error) {
	// nats would time such a request out at once, blaming the coordinator.
	if f.timeout <= 0 {
		return nil, fmt.Errorf("--timeout %s: must be positive (e.g. 10s)", f.timeout)
	}
	nc, err := transport.Connect(f.natsURL, "gpusched-cli", nats.Token(f.token))
	if err != nil {
		return nil, fmt.Errorf("%w (is `coordinator serve` running? pass --nats-url or set GPUSCHED_NATS_URL)", err)
	}
	return nc, nil
}

func (f *clientFlags) call(verb string, req, resp any) error {
	nc, err := f.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	return transport.Request(nc, verb, req, resp, f.timeout)
}

// badReply is the error for a coordinator reply that decodes but does not
// hold what verb asked for.
func badReply(verb, format string, a ...any) error {
	return fmt.Errorf("%s: bad reply from the coordinator: %s", verb, fmt.Sprintf(format, a...))
}

// checkJob checks that a reply holds a job record.
func checkJob(verb string, r *actors.JobRecord) error {
	if r.ID == "" {
		return badReply(verb, "no job in it (no id)")
	}
	return nil
}

func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func gib(b int64) string {
	if b == 0 {
		return "-"
	}
	return gpu.FormatBytes(b)
}
