// Package actors is gpusched's distributed runtime, written with
// protoactor-go: a coordinator actor that places jobs by predicted peak
// memory, one job actor per job that owns its lifecycle and negotiates a
// memory budget, a node actor per machine, and one device actor per GPU that
// owns that GPU's memory plan and runs iterations on a device.
//
// Messages between processes are protobuf (package actors/pb); the job store
// and events go through NATS (package transport).
package actors

import (
	"fmt"
	"sync"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/tensorsched"
	"github.com/gpusched/gpusched/workload"
	"github.com/gpusched/gpusched/workload/zoo"
)

// Planner is what the runtime needs from the per-GPU memory scheduler.
type Planner interface {
	// Name identifies the planner in logs and reports.
	Name() string
	// MinBudget is the smallest budget at which the job's planned extra
	// iteration time stays within tolerance, and its vanilla peak.
	MinBudget(g *workload.Graph, p gpu.Profile, tolerance float64) (min, vanilla int64, err error)
	// Plan sets jobs[i].Plan so that each job keeps within jobs[i].Budget
	// when the jobs run together on a device of profile p.
	Plan(p gpu.Profile, jobs []tensorsched.Job) error
}

// Prediction is a job's demand on one device type and its graph.
type Prediction struct {
	Demand *pb.Demand
	Graph  *workload.Graph
}

// Predictor predicts a job's memory demand on a device type.
type Predictor interface {
	Predict(spec *pb.JobSpec, deviceType string) (*Prediction, error)
}

// ZooPredictor builds graphs from the model zoo and asks a Planner for the
// minimum budget. Results are cached by model, kind, batch, precision,
// sequence length, device and tolerance.
type ZooPredictor struct {
	Planner Planner
	mu      sync.Mutex
	cache   map[string]*Prediction
}

// NewZooPredictor returns a predictor using planner.
func NewZooPredictor(planner Planner) *ZooPredictor {
	return &ZooPredictor{Planner: planner, cache: map[string]*Prediction{}}
}

// Predict implements Predictor.
func (z *ZooPredictor) Predict(s *pb.JobSpec, deviceType string) (*Prediction, error) {
	key := demandKey(s, deviceType)
	z.mu.Lock()
	if p, ok := z.cache[key]; ok {
		z.mu.Unlock()
		return p, nil
	}
	z.mu.Unlock()
	prof, err := gpu.LookupProfile(deviceType)
	if err != nil {
		return nil, err
	}
	g, err := zoo.Build(s.Model, workload.JobKind(s.Kind), int(s.Batch), zoo.WithOptimizer(zoo.Options{Seq: int(s.Seq), DType: s.Dtype, ParamChunkBytes: s.ParamChunkBytes}, s.Optimizer))
	if err != nil {
		return nil, err
	}
	min, vanilla, err := z.Planner.MinBudget(g, prof, s.Tolerance)
	if err != nil {
		return nil, fmt.Errorf("predict %s: %w", s.Model, err)
	}
	p := &Prediction{Graph: g, Demand: &pb.Demand{MinBudget: min, VanillaPeak: vanilla, IterationSeconds: prof.GraphSeconds(g)}}
	z.mu.Lock()
	z.cache[key] = p
	z.mu.Unlock()
	return p, nil
}

// BaselinePlanner is a Planner built from tensorsched's baseline policies,
// each run on the sim executor: for a budget it picks the fastest policy
// whose peak fits, and MinBudget is the lowest peak among the policies that
// stay within the tolerance. It is the fallback when the TENSILE planner is
// not available, and a floor the TENSILE planner must beat.
type BaselinePlanner struct {
	// Policies to try, in order of preference (default: none, vdnn-conv,
	// vdnn-all, checkpoint — whichever are registered).
	Policies []string

	mu    sync.Mutex
	cache map[*workload.Graph][]candidate
}

type candidate struct {
	plan    *tensorsched.Plan
	peak    int64
	seconds float64
}

// Name implements Planner.
func (b *BaselinePlanner) Name() string { return "baselines" }

func (b *BaselinePlanner) candidates(g *workload.Graph, p gpu.Profile) ([]candidate, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cache == nil {
		b.cache = map[*workload.Graph][]candidate{}
	}
	if c, ok := b.cache[g]; ok {
		return c, nil
	}
	names := b.Policies
	if len(names) == 0 {
		names = []string{"none", "vdnn-conv", "vdnn-all", "checkpoint"}
	}
	var out []candidate
	for _, n := range names {
		pol, err := tensorsched.LookupBaseline(n)
		if err != nil {
			continue
		}
		plan := pol(g, p)
		r, err := tensorsched.Execute(gpu.NewSim(p, gpu.SimOptions{}), []tensorsched.Job{{Name: n, Graph: g, Plan: plan}}, tensorsched.ExecOptions{})
		if err != nil {
			continue
		}
		out = append(out, candidate{plan: plan, peak: r.Jobs[0].PeakBytes, seconds: r.Jobs[0].IterationSeconds})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no baseline policy could run %s on %s", g.Model, p.Name)
	}
	b.cache[g] = out
	return out, nil
}

// MinBudget implements Planner.
func (b *BaselinePlanner) MinBudget(g *workload.Graph, p gpu.Profile, tolerance float64) (int64, int64, error) {
	cs, err := b.candidates(g, p)
	if err != nil {
		return 0, 0, err
	}
	vanilla, base := cs[0].peak, cs[0].seconds
	min := vanilla
	for _, c := range cs {
		if c.seconds <= base*(1+tolerance) && c.peak < min {
			min = c.peak
		}
	}
	if vanilla < min {
		vanilla = min
	}
	return min, vanilla, nil
}

// Plan implements Planner.
func (b *BaselinePlanner) Plan(p gpu.Profile, jobs []tensorsched.Job) error {
	for i := range jobs {
		cs, err := b.candidates(jobs[i].Graph, p)
		if err != nil {
			return err
		}
		best := -1
		for k, c := range cs {
			if jobs[i].Budget > 0 && c.peak > jobs[i].Budget {
				continue
			}
			if best < 0 || c.seconds < cs[best].seconds {
				best = k
			}
		}
		if best < 0 {
			return fmt.Errorf("job %s: no plan fits a budget of %s", jobs[i].Name, gpu.FormatBytes(jobs[i].Budget))
		}
		jobs[i].Plan = cs[best].plan
	}
	return nil
}
