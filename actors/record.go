package actors

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/workload"
)

// JobState is where a job is in its life.
type JobState string

// Job states. Completed, failed and cancelled are terminal.
const (
	StatePending   JobState = "pending"   // waiting for a GPU (Reason says why)
	StatePlaced    JobState = "placed"    // a GPU is chosen; negotiating a budget
	StateRunning   JobState = "running"   // budget granted; iterations running
	StateCompleted JobState = "completed" // all iterations done
	StateFailed    JobState = "failed"
	StateCancelled JobState = "cancelled"
)

// AllStates lists every state.
var AllStates = []JobState{StatePending, StatePlaced, StateRunning, StateCompleted, StateFailed, StateCancelled}

// Terminal reports whether s is a final state.
func (s JobState) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCancelled
}

// JobRecord is a job's durable state, stored as JSON under "job.<id>" in
// the JetStream KV bucket and returned by the status and list API verbs.
type JobRecord struct {
	ID   string        `json:"id"`
	Seq  uint64        `json:"seq"` // submission order
	Spec workload.Spec `json:"spec"`

	State  JobState `json:"state"`
	Reason string   `json:"reason,omitempty"` // why it waits or failed

	Node       string `json:"node,omitempty"`
	GPU        string `json:"gpu,omitempty"`
	DeviceAddr string `json:"device_addr,omitempty"` // device actor address
	DeviceID   string `json:"device_id,omitempty"`   // device actor id
	// GPUs lists every GPU the job runs on, one per data-parallel replica
	// (GPU is the first); Replicas has the same GPUs with their device
	// actors when there is more than one.
	GPUs     []string  `json:"gpus,omitempty"`
	Replicas []Replica `json:"replicas,omitempty"`
	// SyncSeconds is the gradient synchronisation time per iteration across
	// the replicas (0 on one GPU).
	SyncSeconds float64 `json:"sync_seconds,omitempty"`

	MinBudget   int64 `json:"min_budget,omitempty"`
	VanillaPeak int64 `json:"vanilla_peak,omitempty"`
	// PredSeconds is the predicted seconds of one micro-step (of the
	// whole iteration when the job runs no extra micro-steps).
	PredSeconds float64 `json:"predicted_iteration_seconds,omitempty"`
	Budget      int64   `json:"budget,omitempty"`
	Resizes     int     `json:"resizes,omitempty"`
	// Batch is the (global) batch size the job runs at now (elastic jobs
	// change it): its replicas' per-GPU batch times their count, times
	// Accum+1.
	Batch int `json:"batch,omitempty"`
	// Accum is how many extra gradient-accumulation micro-steps each
	// iteration runs (an elastic policy's choice; 0: none): each replica
	// runs Accum+1 micro-steps of Batch/(replicas × (Accum+1)) samples and
	// synchronises gradients once.
	Accum int `json:"accum_steps,omitempty"`

	// Checkpoint: progress survives a node loss (the job resumes here).
	Iteration      int64   `json:"iteration"`
	Total          int64   `json:"total"`
	IterSeconds    float64 `json:"iteration_seconds,omitempty"`
	PeakBytes      int64   `json:"peak_bytes,omitempty"`
	SwappedBytes   int64   `json:"swapped_bytes,omitempty"`
	PlanVersion    int64   `json:"plan_version,omitempty"`
	PlanActions    int32   `json:"plan_actions,omitempty"`
	VirtualSeconds float64 `json:"virtual_seconds,omitempty"`
	Attempt        int     `json:"attempt,omitempty"` // times (re)queued after a node loss
	// AttainedGPUSeconds is an elastic job's attained service, in
	// GPU-seconds of job time, as the coordinator's elastic loop counted it
	// when the record was stored: a restarted coordinator goes on from it.
	AttainedGPUSeconds float64 `json:"attained_gpu_seconds,omitempty"`

	SubmittedAt time.Time `json:"submitted_at"`
	PlacedAt    time.Time `json:"placed_at,omitzero"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	FinishedAt  time.Time `json:"finished_at,omitzero"`
}

// Replica is one data-parallel replica of a job: the GPU and device actor
// it runs on, and its budget there.
type Replica struct {
	GPU        string `json:"gpu"`
	Node       string `json:"node"`
	DeviceAddr string `json:"device_addr"`
	DeviceID   string `json:"device_id"`
	Budget     int64  `json:"budget,omitempty"`
}

// JobKey is the KV key of a job record.
func JobKey(id string) string { return "job." + id }

// JobID formats the id of the n-th submitted job.
func JobID(n uint64) string { return "j-" + strconv.FormatUint(n, 10) }

// ValidJobID reports whether s looks like a job id (safe as a subject token).
func ValidJobID(s string) bool {
	if !strings.HasPrefix(s, "j-") {
		return false
	}
	_, err := strconv.ParseUint(s[2:], 10, 64)
	return err == nil
}

// encodeRecord is r as the store keeps it. It fails only for a record
// holding a value JSON cannot carry (a NaN or infinite number): callers
// keep the stored record they have rather than replace it with nothing.
func encodeRecord(r *JobRecord) ([]byte, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode job record %s: %w", r.ID, err)
	}
	return b, nil
}

func decodeRecord(b []byte) (*JobRecord, error) {
	var r JobRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode job record: %w", err)
	}
	return &r, nil
}

// RunSpec converts a job spec to the message nodes run it from.
func RunSpec(id string, s *workload.Spec) *pb.JobSpec {
	iters := int64(s.Iterations)
	if s.Kind == workload.Infer {
		iters = int64(s.Requests)
	}
	if iters <= 0 && s.TargetSamples > 0 && s.Batch.Max > 0 {
		iters = (s.TargetSamples + int64(s.Batch.Max) - 1) / int64(s.Batch.Max)
	}
	batch := s.Batch.Max
	if batch <= 0 {
		batch = s.Batch.Min
	}
	return &pb.JobSpec{Id: id, Name: s.Name, Model: s.Model, Kind: string(s.Kind), Batch: int32(batch),
		Iterations: iters, Priority: int32(s.Priority), Tolerance: s.Tolerance, Gpus: int32(max(1, s.GPUs.Min)),
		Seq: int32(s.Seq), Dtype: s.DType, BaseBatch: int32(batch),
		ParamChunkBytes: s.ParamChunk, Optimizer: s.Optimizer,
		HostPerIteration: s.Host.PerIteration, HostPerKernel: s.Host.PerKernel, HostPerRequest: s.Host.PerRequest,
		ArrivalRate: arrivalRate(s)}
}

func (r *JobRecord) clone() *JobRecord {
	c := *r
	c.GPUs = append([]string(nil), r.GPUs...)
	c.Replicas = append([]Replica(nil), r.Replicas...)
	return &c
}

// AllGPUs is every GPU the job holds: GPUs, or GPU alone (records written
// before jobs had replicas, and jobs not yet placed).
func (r *JobRecord) AllGPUs() []string {
	if len(r.GPUs) > 0 {
		return r.GPUs
	}
	if r.GPU != "" {
		return []string{r.GPU}
	}
	return nil
}
