package transport

import (
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Event subjects: gpusched.events.job.<id> and gpusched.events.node.<name>.
const (
	EventsPrefix     = "gpusched.events"
	JobEventsPrefix  = EventsPrefix + ".job."
	NodeEventsPrefix = EventsPrefix + ".node."
	AllEvents        = EventsPrefix + ".>"
	AllJobEvents     = EventsPrefix + ".job.>"
)

// Event types.
const (
	EvSubmitted = "submitted"
	EvPlaced    = "placed"
	EvStarted   = "started"
	EvProgress  = "progress"
	EvResized   = "resized"
	// EvResizeRefused is an elastic change (batch size, GPU count or GPUs)
	// that could not be applied: the job keeps running where it was.
	EvResizeRefused = "resize_refused"
	EvRequeued      = "requeued"
	EvCompleted     = "completed"
	EvFailed        = "failed"
	EvCancelled     = "cancelled"
	EvJoined        = "joined"
	EvSuspect       = "suspect"
	EvDead          = "dead"
	EvLeft          = "left"
	EvAlive         = "alive" // a suspect node answering again
)

// Event is one job or node event, published as JSON. Fields that do not
// apply to a type are omitted.
type Event struct {
	// Seq increases by one with every event the coordinator publishes, also
	// across coordinator restarts (it continues from the stream's last sequence).
	Seq  uint64    `json:"seq"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`

	Job  string `json:"job,omitempty"`
	Name string `json:"name,omitempty"` // job name
	Node string `json:"node,omitempty"`
	GPU  string `json:"gpu,omitempty"`

	Budget      int64   `json:"budget,omitempty"`
	OldBudget   int64   `json:"old_budget,omitempty"`
	MinBudget   int64   `json:"min_budget,omitempty"`
	VanillaPeak int64   `json:"vanilla_peak,omitempty"`
	Iteration   int64   `json:"iteration,omitempty"`
	Total       int64   `json:"total,omitempty"`
	IterSeconds float64 `json:"iteration_seconds,omitempty"`
	PeakBytes   int64   `json:"peak_bytes,omitempty"`
	Swapped     int64   `json:"swapped_bytes,omitempty"`
	PlanVersion int64   `json:"plan_version,omitempty"`
	PlanActions int32   `json:"plan_actions,omitempty"`
	Attempt     int     `json:"attempt,omitempty"`
	Reason      string  `json:"reason,omitempty"`
	// Unanswered marks a resize_refused event whose change was given up
	// because devices did not answer in time, none having refused it: the
	// elastic loop may order it again after a few rounds.
	Unanswered bool `json:"unanswered,omitempty"`

	Address    string `json:"address,omitempty"` // node actor address
	GPUs       int    `json:"gpus,omitempty"`
	DeviceType string `json:"device_type,omitempty"`

	// Batch and OldBatch are a job's batch size after and before an
	// elastic resize; OldGPUs its GPU count before (GPUs after).
	Batch    int `json:"batch,omitempty"`
	OldBatch int `json:"old_batch,omitempty"`
	OldGPUs  int `json:"old_gpus,omitempty"`
	// Accum and OldAccum are its extra gradient-accumulation micro-steps
	// per iteration after and before the change (Batch counts them all).
	Accum    int `json:"accum_steps,omitempty"`
	OldAccum int `json:"old_accum_steps,omitempty"`
	// GPUIDs and OldGPUIDs name the GPUs a job with data-parallel replicas
	// runs on after and before an elastic change (one per replica).
	GPUIDs    []string `json:"gpu_ids,omitempty"`
	OldGPUIDs []string `json:"old_gpu_ids,omitempty"`
}

// Subject is where e is published.
func (e *Event) Subject() string {
	if e.Job != "" {
		return JobEventsPrefix + e.Job
	}
	return NodeEventsPrefix + e.Node
}

// Publisher stamps events with a sequence number and a time and publishes
// them through JetStream, so they reach live subscribers of the subject and
// are captured in the events stream.
type Publisher struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	mu     sync.Mutex
	seq    uint64 // the stream's last sequence as this publisher knows it
	// resync: a publish failed without saying whether the stream stored
	// the event; seq is read from the stream again before the next one.
	resync bool
	now    func() time.Time
}

// NewPublisher creates (or opens) the events stream and continues its sequence.
func NewPublisher(nc *nats.Conn) (*Publisher, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	c, cancel := ctx(10 * time.Second)
	defer cancel()
	st, err := js.CreateOrUpdateStream(c, jetstream.StreamConfig{
		Name:        EventsStream,
		Description: "gpusched job and node events",
		Subjects:    []string{AllEvents},
		Storage:     jetstream.FileStorage,
		MaxAge:      7 * 24 * time.Hour,
		MaxMsgs:     1_000_000,
	})
	if err != nil {
		return nil, fmt.Errorf("create JetStream stream %s: %w", EventsStream, err)
	}
	info, err := st.Info(c)
	if err != nil {
		return nil, err
	}
	return &Publisher{js: js, stream: st, seq: info.State.LastSeq, now: time.Now}, nil
}

// Publish stamps and publishes e, returning the stamped copy. An event that
// is not published does not use up a sequence number: the next one takes
// it, as a restarted publisher (continuing from the stream) would.
func (p *Publisher) Publish(e Event) (Event, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c, cancel := ctx(5 * time.Second)
	defer cancel()
	if p.resync {
		info, err := p.stream.Info(c)
		if err != nil {
			return e, fmt.Errorf("publish %s event: read the events stream's sequence: %w", e.Type, err)
		}
		p.seq, p.resync = info.State.LastSeq, false
	}
	e.Seq = p.seq + 1
	if e.Time.IsZero() {
		e.Time = p.now().UTC()
	}
	b, err := json.Marshal(e)
	if err != nil {
		return e, err
	}
	ack, err := p.js.Publish(c, e.Subject(), b)
	if err != nil {
		p.resync = true
		return e, err
	}
	p.seq = ack.Sequence
	return e, nil
}

// ParseEvent decodes an event message. A message that is not an event
// (null, {}, no type, neither a job nor a node) is an error naming what is
// missing.
func ParseEvent(b []byte) (Event, error) {
	var e Event
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("event: %w", err)
	}
	if e.Type == "" {
		return e, fmt.Errorf("event: no \"type\" (every event has one, e.g. \"type\": %q)", EvProgress)
	}
	if e.Job == "" && e.Node == "" {
		return e, fmt.Errorf("event %s: neither \"job\" nor \"node\" (a job event names its job, a node event its node)", e.Type)
	}
	return e, nil
}
