package workload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/gpusched/gpusched/internal/yamlnode"
)

// Limits and defaults of job specs.
const (
	// DefaultTolerance is the tolerated extra iteration time for memory
	// scheduling when a spec does not set one (10%).
	DefaultTolerance = 0.10
	// MaxPriority is the highest priority; priorities run from 0 (lowest,
	// the default) to MaxPriority.
	MaxPriority = 9
	// MaxBatch is the largest batch size a spec may ask for.
	MaxBatch = 1 << 20
	// MaxGPUs is the largest GPU count a spec may ask for.
	MaxGPUs = 1 << 14
	// MaxSeq is the longest sequence length a spec may ask for.
	MaxSeq = 1 << 20
	// MaxNameLen is the longest job name (a DNS label).
	MaxNameLen = 63
)

// SpecDTypes are the compute precisions a spec's dtype may name.
var SpecDTypes = []string{"fp32", "tf32", "bf16", "fp16"}

// Range is an inclusive range of integers. A fixed value has Min == Max; an
// elastic job has Min < Max for its batch size or GPU count. The zero Range
// means "not set". In YAML a Range is written as an integer (fixed), as
// {min: 8, max: 64}, or as {value: 32}.
type Range struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// Fixed returns the Range holding only n.
func Fixed(n int) Range { return Range{Min: n, Max: n} }

// IsFixed reports whether r holds a single value.
func (r Range) IsFixed() bool { return r.Min == r.Max }

// MarshalYAML writes a fixed range as an integer and any other as {min, max}.
func (r Range) MarshalYAML() (any, error) {
	if r.IsFixed() {
		return r.Min, nil
	}
	return struct {
		Min int `yaml:"min"`
		Max int `yaml:"max"`
	}{r.Min, r.Max}, nil
}

// Arrivals is the request arrival process of an inference job: either a
// Poisson process of PoissonRate requests per second (deterministic for a
// given Seed) or an explicit list of arrival Times in seconds from the job's
// start, non-decreasing.
type Arrivals struct {
	PoissonRate float64   `yaml:"poisson_rate,omitempty" json:"poisson_rate,omitempty"`
	Times       []float64 `yaml:"times,omitempty" json:"times,omitempty"`
	Seed        int64     `yaml:"seed,omitempty" json:"seed,omitempty"`
}

// HostTimes is host-side (CPU) time during which the job's GPU work waits:
// the gaps that FIKIT fills with other jobs' kernels. All values are seconds.
// In YAML each is a duration string ("5ms", "20us") or a number of seconds.
type HostTimes struct {
	// PerIteration is spent before each iteration (data loading) or, for
	// inference, before each batch.
	PerIteration float64 `yaml:"per_iteration,omitempty" json:"per_iteration,omitempty"`
	// PerKernel is spent between consecutive kernel launches.
	PerKernel float64 `yaml:"per_kernel,omitempty" json:"per_kernel,omitempty"`
	// PerRequest is pre- and post-processing of each inference request.
	PerRequest float64 `yaml:"per_request,omitempty" json:"per_request,omitempty"`
}

// IsZero reports whether no host time is set.
func (h HostTimes) IsZero() bool { return h == HostTimes{} }

// Spec is one job as a user submits it. ParseSpec and ParseSpecs fill in the
// defaults (kind train, tolerance 10%, one GPU); a Spec built in code must set
// Kind, Tolerance and GPUs itself.
type Spec struct {
	// Name identifies the job: a DNS label (a–z, 0–9 and '-', at most 63).
	Name string `json:"name"`
	// Model is a model-zoo name; exactly one of Model and Trace is set.
	Model string `json:"model,omitempty"`
	// Trace is the path of a gpusched.trace/v1 file.
	Trace string `json:"trace,omitempty"`
	// Kind is Train or Infer.
	Kind JobKind `json:"kind"`
	// Batch is the batch size, or its range for an elastic training job.
	// A trace job may leave it zero (the trace's batch is used).
	Batch Range `json:"batch"`
	// Iterations is how many iterations a training job runs; alternatively
	// TargetSamples says how many samples it must process. Exactly one is set.
	Iterations    int   `json:"iterations,omitempty"`
	TargetSamples int64 `json:"target_samples,omitempty"`
	// Requests is how many requests an inference job serves.
	Requests int `json:"requests,omitempty"`
	// Priority runs from 0 (lowest) to MaxPriority.
	Priority int `json:"priority"`
	// Tolerance is the tolerated extra iteration time from memory
	// scheduling, as a fraction (0.10 is 10%).
	Tolerance float64 `json:"tolerance"`
	// GPUs is the GPU count, or its range for an elastic training job.
	GPUs Range `json:"gpus"`
	// Device is the device profile the job must run on (optional): the
	// coordinator places it only on GPUs of that type.
	Device string `json:"device,omitempty"`
	// Arrivals is the request arrival process of an inference job. Nil
	// means requests are issued back to back (each when the previous one
	// completes).
	Arrivals *Arrivals `json:"arrivals,omitempty"`
	// Host is host-side time that leaves the GPU idle.
	Host HostTimes `json:"host,omitzero"`
	// Seq is the sequence length of a transformer model (0: the model's
	// default).
	Seq int `json:"seq,omitempty"`
	// DType is the compute precision (one of SpecDTypes; "" for fp32).
	DType string `json:"dtype,omitempty"`
	// ParamChunk, when positive, stores each linear weight of a zoo
	// training model larger than this many bytes as row chunks, each with
	// its own gradient and Adam moments (zoo.Options.ParamChunkBytes).
	ParamChunk int64 `json:"param_chunk,omitempty"`
	// Optimizer is when a zoo training model's Adam updates run (one of
	// SpecOptimizers; "" for all after backward): fused into backward, or
	// fused with a chunked weight's updates spread over the rest of
	// backward (zoo.Options.FusedOptimizer, SpreadOptimizer).
	Optimizer string `json:"optimizer,omitempty"`
}

// SpecOptimizers are the optimizer orders a spec's optimizer may name
// ("" is the standard one: every update after backward).
var SpecOptimizers = []string{"fused", "spread"}

// BatchRange returns the smallest and largest batch size.
func (s *Spec) BatchRange() (min, max int) { return s.Batch.Min, s.Batch.Max }

// GPURange returns the smallest and largest GPU count.
func (s *Spec) GPURange() (min, max int) { return s.GPUs.Min, s.GPUs.Max }

// Elastic reports whether the batch size or the GPU count may change while
// the job runs.
func (s *Spec) Elastic() bool { return !s.Batch.IsFixed() || !s.GPUs.IsFixed() }

// ToleranceFraction is the tolerated extra iteration time as a fraction
// (0.10 means 10%).
func (s *Spec) ToleranceFraction() float64 { return s.Tolerance }

// ArrivalTimes returns the arrival times, in seconds from the job's start, of
// the first n requests. For a Poisson process they are drawn from a random
// generator seeded by Arrivals.Seed, so the same spec always gives the same
// times; for an explicit list they are its first n entries (all of them when
// n exceeds its length). It returns nil when the spec has no arrival process.
func (s *Spec) ArrivalTimes(n int) []float64 {
	a := s.Arrivals
	if a == nil || n <= 0 {
		return nil
	}
	if len(a.Times) > 0 {
		return slices.Clone(a.Times[:min(n, len(a.Times))])
	}
	if !(a.PoissonRate > 0) || math.IsInf(a.PoissonRate, 0) {
		return nil
	}
	return poissonTimes(n, a.PoissonRate, a.Seed)
}

// poissonTimes draws n arrival times of a Poisson process of the given rate.
// Gaps are exponential by inversion of uniform draws from PCG, both fixed
// algorithms, so the times do not change between Go releases.
func poissonTimes(n int, rate float64, seed int64) []float64 {
	r := rand.NewPCG(uint64(seed), 0x9e3779b97f4a7c15)
	out := make([]float64, n)
	t := 0.0
	for i := range out {
		u := float64(r.Uint64()>>11) / (1 << 53) // uniform in [0, 1)
		t += -math.Log1p(-u) / rate
		out[i] = t
	}
	return out
}

// ValidateOptions supplies the checks that need other packages (the model
// zoo, the device profiles), passed in by callers to avoid import cycles.
type ValidateOptions struct {
	// KnownModel reports whether a zoo model exists. Nil: accept any model
	// listed in Models, or any model at all when Models is empty too.
	KnownModel func(string) bool
	// KnownDevice reports whether a device profile exists. Nil: accept any
	// device listed in Devices, or any device when Devices is empty too.
	KnownDevice func(string) bool
	// Models and Devices, when set, are listed in error messages (and
	// checked against when the matching func is nil).
	Models  []string
	Devices []string
	// MaxSeq returns the longest sequence length a zoo model takes (0: the
	// model has none and ignores seq). Nil: seq is only checked against
	// MaxSeq, the package's limit.
	MaxSeq func(model string) int
	// ParamChunk checks a param_chunk against a zoo model at the spec's
	// dtype (a chunk below one row of a weight it would split is an
	// error). Nil: only its sign is checked.
	ParamChunk func(model, dtype string, bytes int64) error
	// RefuseTraces, when set, is why a job may not name a trace (a caller
	// that runs zoo models only): every trace field is a problem with it.
	RefuseTraces string
}

func (o ValidateOptions) modelOK(m string) bool {
	if o.KnownModel != nil {
		return o.KnownModel(m)
	}
	return len(o.Models) == 0 || slices.Contains(o.Models, m)
}

func (o ValidateOptions) deviceOK(d string) bool {
	if o.KnownDevice != nil {
		return o.KnownDevice(d)
	}
	return len(o.Devices) == 0 || slices.Contains(o.Devices, d)
}

// Validate checks s and returns every problem at once (joined with
// errors.Join), each naming the field and what is allowed.
func (s *Spec) Validate(opts ValidateOptions) error {
	var p problems
	s.validate(&p, "", opts, nil, nil)
	return p.err()
}

// ValidateSpecs validates every spec and checks that names are unique.
// Problems are named by the spec's index: jobs[2].batch.min.
func ValidateSpecs(specs []Spec, opts ValidateOptions) error {
	var p problems
	for i := range specs {
		specs[i].validate(&p, fmt.Sprintf("jobs[%d]", i), opts, nil, nil)
	}
	checkUniqueNames(&p, specs, func(i int) string { return fmt.Sprintf("jobs[%d]", i) })
	return p.err()
}

func checkUniqueNames(p *problems, specs []Spec, path func(int) string) {
	first := map[string]int{}
	for i := range specs {
		n := specs[i].Name
		if n == "" {
			continue
		}
		if j, ok := first[n]; ok {
			p.add("%s: duplicate job name %q (also %s); names must be unique", field(path(i), "name"), n, path(j))
			continue
		}
		first[n] = i
	}
}

// field joins a path prefix and a field name: field("jobs[2]", "batch").
func field(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// at names the job itself in a message: its path, or "job" at top level.
func at(prefix string) string {
	if prefix == "" {
		return "job"
	}
	return prefix
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// validate adds s's problems to p. Fields named in skip already had a parse
// error and are not checked again. given, when not nil, names the optional
// fields the YAML wrote out ("arrivals.poisson_rate"), so that a field given
// as its zero value is told apart from one left out; for a Spec built in Go
// it is nil and a zero value counts as not set.
func (s *Spec) validate(p *problems, prefix string, opts ValidateOptions, skip, given map[string]bool) {
	f := func(name string) string { return field(prefix, name) }
	check := func(name string) bool { return !skip[name] }

	if check("name") {
		switch {
		case s.Name == "":
			p.add("%s: required: a DNS label such as \"resnet50-train\"", f("name"))
		case len(s.Name) > MaxNameLen || !dnsLabel.MatchString(s.Name):
			p.add("%s: must be a DNS label: lowercase letters, digits and '-', starting and ending with a letter or digit, at most %d characters (got %q)", f("name"), MaxNameLen, s.Name)
		}
	}

	if check("model") && check("trace") {
		switch {
		case s.Model != "" && s.Trace != "":
			p.add("%s: set either model or trace, not both", at(prefix))
		case s.Model == "" && s.Trace == "":
			p.add("%s: set model (a zoo model name) or trace (a %s file)", at(prefix), TraceFormat)
		}
	}
	if check("trace") && s.Trace != "" && opts.RefuseTraces != "" {
		p.add("%s: %s", f("trace"), opts.RefuseTraces)
	}
	if check("model") && s.Model != "" && !opts.modelOK(s.Model) {
		p.add("%s: unknown model %q%s", f("model"), s.Model, knownList(s.Model, opts.Models))
	}
	isTrace := s.Trace != "" && s.Model == ""

	kindOK := s.Kind == Train || s.Kind == Infer
	if check("kind") && !kindOK {
		p.add("%s: must be %q or %q (got %q)", f("kind"), Train, Infer, s.Kind)
	}

	if check("batch") {
		switch {
		case s.Batch == Range{} && !isTrace:
			p.add("%s: required: a batch size ≥ 1, or {min, max} for an elastic training job", f("batch"))
		case s.Batch == Range{}:
			// A trace job runs at the trace's batch size.
		case isTrace && !s.Batch.IsFixed():
			p.add("%s: a trace is recorded at one batch size; a range {min, max} needs a zoo model", f("batch"))
		default:
			checkRange(p, f("batch"), s.Batch, MaxBatch)
		}
		if s.Kind == Infer && !s.Batch.IsFixed() {
			p.add("%s: an inference job takes one batch size; ranges are for elastic training jobs", f("batch"))
		}
	}
	if check("gpus") {
		checkRange(p, f("gpus"), s.GPUs, MaxGPUs)
		if s.Kind == Infer && !s.GPUs.IsFixed() {
			p.add("%s: an inference job takes one GPU count; ranges are for elastic training jobs", f("gpus"))
		}
	}

	switch s.Kind {
	case Train:
		if check("iterations") && check("target_samples") {
			switch {
			case s.Iterations != 0 && s.TargetSamples != 0:
				p.add("%s: set either iterations or target_samples, not both", at(prefix))
			case s.Iterations == 0 && s.TargetSamples == 0:
				p.add("%s: required for a training job (or set target_samples)", f("iterations"))
			}
		}
		if check("requests") && s.Requests != 0 {
			p.add("%s: only for inference jobs (kind: infer); a training job sets iterations or target_samples", f("requests"))
		}
		if check("arrivals") && s.Arrivals != nil {
			p.add("%s: only for inference jobs (kind: infer)", f("arrivals"))
		}
		if check("host") && s.Host.PerRequest != 0 {
			p.add("%s: only for inference jobs (kind: infer); use per_iteration for data loading", f("host.per_request"))
		}
	case Infer:
		if check("iterations") && s.Iterations != 0 {
			p.add("%s: only for training jobs; an inference job sets requests", f("iterations"))
		}
		if check("target_samples") && s.TargetSamples != 0 {
			p.add("%s: only for training jobs; an inference job sets requests", f("target_samples"))
		}
		if check("requests") && s.Requests == 0 {
			p.add("%s: required for an inference job: the number of requests to serve (≥ 1)", f("requests"))
		}
	}
	if check("iterations") && s.Iterations < 0 {
		p.add("%s: must be ≥ 1 (got %d)", f("iterations"), s.Iterations)
	}
	if check("target_samples") && s.TargetSamples < 0 {
		p.add("%s: must be ≥ 1 (got %d)", f("target_samples"), s.TargetSamples)
	}
	if check("requests") && s.Requests < 0 {
		p.add("%s: must be ≥ 1 (got %d)", f("requests"), s.Requests)
	}

	if check("priority") && (s.Priority < 0 || s.Priority > MaxPriority) {
		p.add("%s: must be 0–%d, higher is more important (got %d)", f("priority"), MaxPriority, s.Priority)
	}
	if check("tolerance") && !(s.Tolerance >= 0 && s.Tolerance <= 1) {
		p.add("%s: must be 0%%–100%%, as \"10%%\" or a fraction such as 0.10 (got %v)", f("tolerance"), s.Tolerance)
	}
	if check("device") && s.Device != "" && !opts.deviceOK(s.Device) {
		p.add("%s: unknown device profile %q%s", f("device"), s.Device, knownList(s.Device, opts.Devices))
	}

	if check("arrivals") && s.Arrivals != nil && s.Kind == Infer {
		validateArrivals(p, f("arrivals"), s.Arrivals, s.Requests, !skip["requests"], given["arrivals.poisson_rate"], given["arrivals.seed"])
	}
	if check("host") {
		for _, h := range []struct {
			name string
			v    float64
		}{{"per_iteration", s.Host.PerIteration}, {"per_kernel", s.Host.PerKernel}, {"per_request", s.Host.PerRequest}} {
			if !(h.v >= 0) || math.IsInf(h.v, 0) {
				p.add("%s: must be a duration ≥ 0 such as \"5ms\", or seconds as a number (got %v)", f("host."+h.name), h.v)
			}
		}
	}

	if check("seq") {
		switch {
		case s.Seq < 0 || s.Seq > MaxSeq:
			p.add("%s: must be 1–%d tokens (got %d)", f("seq"), MaxSeq, s.Seq)
		case s.Seq != 0 && isTrace:
			p.add("%s: only for zoo models; a trace is recorded at one sequence length", f("seq"))
		case s.Seq != 0 && s.Model != "" && opts.MaxSeq != nil && check("model") && opts.modelOK(s.Model):
			if m := opts.MaxSeq(s.Model); m > 0 && s.Seq > m {
				p.add("%s: %s takes at most %d tokens (got %d)", f("seq"), s.Model, m, s.Seq)
			}
		}
	}
	if check("param_chunk") {
		switch {
		case s.ParamChunk < 0:
			p.add("%s: must be a size such as 4MiB (got %d bytes); leave it out to keep weights whole", f("param_chunk"), s.ParamChunk)
		case s.ParamChunk > 0 && isTrace:
			p.add("%s: only for zoo models; a trace keeps its tensors as recorded", f("param_chunk"))
		case s.ParamChunk > 0 && s.Kind == Infer:
			p.add("%s: only for training jobs (it splits weights so that their optimizer state can move in parts)", f("param_chunk"))
		case s.ParamChunk > 0 && s.Model != "" && opts.ParamChunk != nil && check("model") && opts.modelOK(s.Model):
			if err := opts.ParamChunk(s.Model, s.DType, s.ParamChunk); err != nil {
				p.add("%s: %v", f("param_chunk"), err)
			}
		}
	}
	if check("optimizer") {
		switch {
		case s.Optimizer != "" && !slices.Contains(SpecOptimizers, s.Optimizer):
			p.add("%s: must be one of %s (got %q); leave it out for every update after backward", f("optimizer"), strings.Join(SpecOptimizers, ", "), s.Optimizer)
		case s.Optimizer != "" && isTrace:
			p.add("%s: only for zoo models; a trace keeps its op order", f("optimizer"))
		case s.Optimizer != "" && s.Kind == Infer:
			p.add("%s: only for training jobs; inference runs no optimizer", f("optimizer"))
		case s.Optimizer == "spread" && s.ParamChunk == 0 && check("param_chunk"):
			p.add("%s: spread spreads the updates of chunked weights: set param_chunk too (4MiB, say), or use optimizer: fused", f("optimizer"))
		}
	}
	if check("dtype") {
		switch {
		case s.DType != "" && !slices.Contains(SpecDTypes, s.DType):
			p.add("%s: must be one of %s (got %q)", f("dtype"), strings.Join(SpecDTypes, ", "), s.DType)
		case s.DType != "" && isTrace:
			p.add("%s: only for zoo models; a trace carries its own precisions", f("dtype"))
		}
	}
}

func checkRange(p *problems, path string, r Range, limit int) {
	if r.IsFixed() {
		if r.Min < 1 || r.Min > limit {
			p.add("%s: must be 1–%d (got %d)", path, limit, r.Min)
		}
		return
	}
	switch {
	case r.Min < 1:
		p.add("%s.min: must be ≥ 1 (got %d)", path, r.Min)
	case r.Min > limit:
		p.add("%s.min: must be ≤ %d (got %d)", path, limit, r.Min)
	}
	if r.Max > limit {
		p.add("%s.max: must be ≤ %d (got %d)", path, limit, r.Max)
	}
	if r.Max < r.Min {
		p.add("%s.max: must be ≥ min (got min %d, max %d)", path, r.Min, r.Max)
	}
}

// validateArrivals checks an arrival process. rateGiven and seedGiven say that
// the YAML wrote poisson_rate or seed out, even as 0: "poisson_rate: 0" is a
// bad rate, not a missing one, and a seed beside times is refused whatever
// its value, since explicit times use no random draws.
func validateArrivals(p *problems, path string, a *Arrivals, requests int, checkCount, rateGiven, seedGiven bool) {
	hasRate, hasTimes := a.PoissonRate != 0 || rateGiven, len(a.Times) > 0
	switch {
	case hasRate && hasTimes:
		p.add("%s: set either poisson_rate or times, not both", path)
	case !hasRate && !hasTimes:
		p.add("%s: set poisson_rate (requests per second) or times (arrival times in seconds)", path)
	}
	if hasRate && !(a.PoissonRate > 0 && a.PoissonRate <= 1e9) {
		p.add("%s.poisson_rate: must be a rate in requests per second, > 0 and ≤ 1e9 (got %v); write e.g. poisson_rate: 50, or list arrival times instead", path, a.PoissonRate)
	}
	if hasTimes && (a.Seed != 0 || seedGiven) {
		p.add("%s.seed: only used with poisson_rate; explicit times make no random draws, so remove seed (got seed: %d beside times)", path, a.Seed)
	}
	prev := 0.0
	for i, t := range a.Times {
		switch {
		case !(t >= 0) || math.IsInf(t, 0):
			p.add("%s.times[%d]: must be a time ≥ 0 in seconds (got %v)", path, i, t)
		case t < prev:
			p.add("%s.times[%d]: must not be earlier than the time before it (got %v after %v)", path, i, t, prev)
		}
		if t >= 0 && !math.IsInf(t, 0) {
			prev = t
		}
	}
	if hasTimes && checkCount && requests > 0 && requests != len(a.Times) {
		p.add("%s.times: has %d arrival times but requests is %d; give one time per request", path, len(a.Times), requests)
	}
}

// knownList formats the allowed names for an unknown-name message, with a
// suggestion when one is close.
func knownList(got string, known []string) string {
	if len(known) == 0 {
		return ""
	}
	s := " (known: " + strings.Join(known, ", ") + ")"
	if near := nearest(got, known); near != "" {
		s += fmt.Sprintf("; did you mean %q?", near)
	}
	return s
}

// Nearest is nearest for other packages' unknown-name messages (gpu's
// device profiles): the likely intended candidate, or "".
func Nearest(s string, candidates []string) string { return nearest(s, candidates) }

// nearest returns the candidate closest to s by edit distance, when it is
// close enough to be a likely typo.
func nearest(s string, candidates []string) string {
	best, bestD := "", math.MaxInt
	ls := strings.ToLower(s)
	for _, c := range candidates {
		if lc := strings.ToLower(c); len(lc) >= 3 && (strings.HasPrefix(ls, lc) || strings.HasPrefix(lc, ls) && len(ls) >= 3) {
			return c // "batchsize" for "batch", "target" for "target_samples"
		}
	}
	for _, c := range candidates {
		if d := editDistance(strings.ToLower(s), strings.ToLower(c)); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= 2 && bestD < len(s) {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return math.MaxInt
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// ---- YAML parsing ----

// Allowed keys, in the order they are listed in messages.
var (
	specKeys     = []string{"name", "model", "trace", "kind", "batch", "iterations", "target_samples", "requests", "priority", "tolerance", "gpus", "device", "arrivals", "host", "seq", "dtype", "param_chunk", "optimizer"}
	rangeKeys    = []string{"min", "max", "value"}
	arrivalKeys  = []string{"poisson_rate", "times", "seed"}
	hostKeys     = []string{"per_iteration", "per_kernel", "per_request"}
	maxMergeNest = 8
)

// ParseSpec parses a YAML document holding one job (a job mapping, or a
// jobs list of one), fills in defaults and validates it without zoo or
// device checks (call Validate with ValidateOptions for those). Every problem
// is reported at once.
func ParseSpec(data []byte) (*Spec, error) {
	specs, err := ParseSpecs(data)
	if err != nil {
		return nil, err
	}
	if len(specs) != 1 {
		return nil, fmt.Errorf("the file holds %d jobs; expected one (use ParseSpecs for several)", len(specs))
	}
	return &specs[0], nil
}

// ParseSpecs parses job specs from YAML: a single job mapping, a mapping
// with a "jobs" list, or several YAML documents (separated by ---), each of
// either form. It fills in defaults, validates every job without zoo or
// device checks (call ValidateSpecs with ValidateOptions for those) and
// checks that names are unique. Every problem is reported at once; when there
// are several jobs, problems are named by the job's index in the returned
// slice, as in "jobs[2].batch.min: must be ≥ 1 (got 0)".
func ParseSpecs(data []byte) ([]Spec, error) {
	return ParseSpecsWith(data, ValidateOptions{})
}

// ParseSpecsWith is ParseSpecs with the zoo and device checks of opts made
// in the same pass, so that a file's problems of both kinds are reported
// together and named alike ("model: unknown model" in a single-job file,
// "jobs[1].model: ..." in a list).
func ParseSpecsWith(data []byte, opts ValidateOptions) ([]Spec, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []*yaml.Node
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("job spec is not valid YAML: %v", err)
		}
		if n := docContent(&doc); n != nil {
			docs = append(docs, n)
		}
	}
	if len(docs) == 0 {
		return nil, errors.New("job spec is empty: expected a job (name, model, batch, ...) or a jobs list")
	}

	// Find the job mappings.
	var p problems
	var jobs []*yaml.Node
	single := false
	for d, n := range docs {
		n = yamlnode.Resolve(n)
		where := "document"
		if len(docs) > 1 {
			where = fmt.Sprintf("document %d", d+1)
		}
		if n.Kind != yaml.MappingNode {
			p.add("%s (line %d): must be a job mapping (%s) or a mapping with a jobs list (got %s)", where, n.Line, strings.Join(specKeys[:3], ", ")+", ...", yamlnode.Describe(n))
			continue
		}
		pairs, err := mappingPairs(n, 0)
		list := lookup(pairs, "jobs")
		if err != nil {
			// Not a jobs list we can read; report it as a job, with its
			// field path, below.
			list = nil
		}
		if list == nil {
			jobs = append(jobs, n)
			single = len(docs) == 1
			continue
		}
		for _, kv := range pairs {
			if kv.key != "jobs" {
				p.add("%s: unknown field %q beside jobs (line %d); a file with a jobs list holds only \"jobs\"", where, kv.key, kv.k.Line)
			}
		}
		list = yamlnode.Resolve(list)
		if list.Kind != yaml.SequenceNode {
			p.add("jobs: must be a list of job mappings (got %s, line %d)", yamlnode.Describe(list), list.Line)
			continue
		}
		for _, item := range list.Content {
			jobs = append(jobs, item)
		}
	}
	if p.n == 0 && len(jobs) == 0 {
		return nil, errors.New("jobs: the list is empty; give at least one job")
	}

	specs := make([]Spec, len(jobs))
	path := func(i int) string {
		if single {
			return ""
		}
		return fmt.Sprintf("jobs[%d]", i)
	}
	for i, n := range jobs {
		skip, given := parseSpec(&p, path(i), n, &specs[i])
		specs[i].validate(&p, path(i), opts, skip, given)
	}
	checkUniqueNames(&p, specs, func(i int) string { return at(path(i)) })
	if err := p.err(); err != nil {
		return nil, err
	}
	return specs, nil
}

// LoadSpecs reads and parses the job spec file at path (see ParseSpecs).
func LoadSpecs(path string) ([]Spec, error) {
	return LoadSpecsWith(path, ValidateOptions{})
}

// LoadSpecsWith is LoadSpecs with the model and device checks of opts made
// in the same pass (see ParseSpecsWith), so every problem of the file is
// reported at once.
func LoadSpecsWith(path string, opts ValidateOptions) ([]Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	specs, err := ParseSpecsWith(data, opts)
	if err != nil {
		return nil, fmt.Errorf("%s:\n%w", path, err)
	}
	return specs, nil
}

// docContent returns a document's root node, or nil for an empty document.
func docContent(doc *yaml.Node) *yaml.Node {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil
	}
	n := doc.Content[0]
	if isNull(n) {
		return nil
	}
	return n
}

func isNull(n *yaml.Node) bool {
	n = yamlnode.Resolve(n)
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

type pair struct {
	key  string
	k, v *yaml.Node
}

// mappingPairs lists a mapping's key-value pairs, expanding merge keys (<<)
// and rejecting duplicate and non-string keys.
func mappingPairs(n *yaml.Node, depth int) ([]pair, error) {
	return mergePairs(n, depth, map[*yaml.Node]bool{n: true})
}

// mergePairs is mappingPairs with the set of mappings already expanded: a
// mapping merged twice adds nothing the second time (earlier merges win), so
// it is expanded once, which keeps aliases from multiplying the work.
func mergePairs(n *yaml.Node, depth int, visited map[*yaml.Node]bool) ([]pair, error) {
	if depth > maxMergeNest {
		return nil, fmt.Errorf("merge keys (<<) nested more than %d deep (line %d)", maxMergeNest, n.Line)
	}
	var out []pair
	var merged []pair
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := yamlnode.Resolve(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode || (k.Tag != "!!str" && k.Tag != "!!merge") {
			return nil, fmt.Errorf("keys must be field names (got %s, line %d)", yamlnode.Describe(k), n.Content[i].Line)
		}
		if k.Tag == "!!merge" {
			src := yamlnode.Resolve(v)
			var srcs []*yaml.Node
			switch {
			case src != nil && src.Kind == yaml.MappingNode:
				srcs = []*yaml.Node{src}
			case src != nil && src.Kind == yaml.SequenceNode:
				for _, s := range src.Content {
					srcs = append(srcs, yamlnode.Resolve(s))
				}
			}
			if len(srcs) == 0 {
				return nil, fmt.Errorf("<<: must merge a mapping or a list of mappings (got %s, line %d)", yamlnode.Describe(src), k.Line)
			}
			for _, s := range srcs {
				if s == nil || s.Kind != yaml.MappingNode {
					return nil, fmt.Errorf("<<: must merge a mapping or a list of mappings (got %s, line %d)", yamlnode.Describe(s), k.Line)
				}
				if visited[s] {
					continue
				}
				visited[s] = true
				ps, err := mergePairs(s, depth+1, visited)
				if err != nil {
					return nil, err
				}
				merged = append(merged, ps...)
			}
			continue
		}
		if j, dup := seen[k.Value]; dup {
			return nil, fmt.Errorf("%s: set twice (lines %d and %d)", k.Value, out[j].k.Line, k.Line)
		}
		seen[k.Value] = len(out)
		out = append(out, pair{k.Value, k, v})
	}
	// Explicit keys win over merged ones; earlier merges win over later.
	for _, m := range merged {
		if _, ok := seen[m.key]; !ok {
			seen[m.key] = len(out)
			out = append(out, m)
		}
	}
	return out, nil
}

func lookup(pairs []pair, key string) *yaml.Node {
	for _, kv := range pairs {
		if kv.key == key {
			return kv.v
		}
	}
	return nil
}

// Errors of fieldsOf.
var (
	errNotMapping = errors.New("not a mapping")
	errReported   = errors.New("mapping unreadable; reported")
)

// fieldsOf returns the non-null fields of a mapping node, reporting unknown
// fields. It returns errNotMapping when n is not a mapping, and errReported
// (after adding the problem to p) when its keys cannot be read: duplicate or
// non-string keys, or a bad merge.
func fieldsOf(p *problems, path string, n *yaml.Node, allowed []string) ([]pair, error) {
	n = yamlnode.Resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, errNotMapping
	}
	pairs, err := mappingPairs(n, 0)
	if err != nil {
		p.add("%s: %v", at(path), err)
		return nil, errReported
	}
	var fields []pair
	for _, kv := range pairs {
		if !slices.Contains(allowed, kv.key) {
			hint := ""
			if near := nearest(kv.key, allowed); near != "" {
				hint = fmt.Sprintf("; did you mean %q?", near)
			}
			p.add("%s: unknown field %q (line %d; allowed: %s)%s", at(path), kv.key, kv.k.Line, strings.Join(allowed, ", "), hint)
			continue
		}
		if isNull(kv.v) {
			continue
		}
		fields = append(fields, kv)
	}
	return fields, nil
}

// parseSpec fills s from a job mapping, applying defaults. It returns the
// fields that failed to parse, which validation then leaves alone.
func parseSpec(p *problems, prefix string, n *yaml.Node, s *Spec) (skip, given map[string]bool) {
	*s = Spec{Kind: Train, Tolerance: DefaultTolerance, GPUs: Fixed(1)}
	skip, given = map[string]bool{}, map[string]bool{}
	fields, err := fieldsOf(p, prefix, n, specKeys)
	if err != nil {
		if err == errNotMapping {
			p.add("%s: must be a job mapping with fields %s (got %s)", at(prefix), strings.Join(specKeys, ", "), yamlnode.Describe(n))
		}
		for _, k := range specKeys {
			skip[k] = true
		}
		return skip, given
	}
	bad := func(key string, format string, args ...any) {
		p.add("%s: "+format, append([]any{field(prefix, key)}, args...)...)
		skip[key] = true
	}
	var timesCount = -1
	for _, kv := range fields {
		path := field(prefix, kv.key)
		v := yamlnode.Resolve(kv.v)
		var err error
		switch kv.key {
		case "name":
			s.Name, err = yamlString(v)
		case "model":
			s.Model, err = yamlString(v)
		case "trace":
			s.Trace, err = yamlString(v)
		case "device":
			s.Device, err = yamlString(v)
		case "dtype":
			s.DType, err = yamlString(v)
		case "optimizer":
			s.Optimizer, err = yamlString(v)
		case "param_chunk":
			s.ParamChunk, err = parseParamChunk(v)
		case "kind":
			var k string
			if k, err = yamlString(v); err == nil {
				s.Kind = JobKind(k)
			}
		case "batch":
			if s.Batch, err = parseRange(p, path, v); err == nil && s.Batch == (Range{}) {
				skip["batch"] = true // reported by parseRange
			}
		case "gpus":
			if s.GPUs, err = parseRange(p, path, v); err == nil && s.GPUs == (Range{}) {
				skip["gpus"] = true
			}
		case "iterations":
			s.Iterations, err = positiveInt(v)
		case "target_samples":
			var n int
			n, err = positiveInt(v)
			s.TargetSamples = int64(n)
		case "requests":
			s.Requests, err = positiveInt(v)
		case "seq":
			s.Seq, err = positiveInt(v)
		case "priority":
			var n int64
			var big bigInt
			if n, err = yamlInt(v); err == nil {
				if n < 0 || n > MaxPriority {
					err = fmt.Errorf("must be 0–%d, higher is more important (got %d)", MaxPriority, n)
				}
				s.Priority = int(n)
			} else if errors.As(err, &big) {
				err = fmt.Errorf("must be 0–%d, higher is more important (got %s)", MaxPriority, big.text)
			}
		case "tolerance":
			s.Tolerance, err = parseTolerance(v)
		case "arrivals":
			s.Arrivals = &Arrivals{}
			if !parseArrivals(p, path, v, s.Arrivals, given) {
				skip["arrivals"] = true
			}
			timesCount = len(s.Arrivals.Times)
		case "host":
			if !parseHost(p, path, v, &s.Host) {
				skip["host"] = true
			}
		}
		if err != nil {
			bad(kv.key, "%v", err)
		}
	}
	// An inference job with an explicit arrival list serves one request per
	// arrival unless it says otherwise.
	if s.Kind == Infer && s.Requests == 0 && !skip["requests"] && timesCount > 0 {
		s.Requests = timesCount
	}
	return skip, given
}

// parseParamChunk reads param_chunk: a size with a unit (4MiB) or a
// number of bytes, above zero.
func parseParamChunk(n *yaml.Node) (int64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("must be a size such as 4MiB (got %s)", yamlnode.Describe(n))
	}
	b, err := ParseBytes(n.Value)
	switch {
	case errors.As(err, new(TooManyBytesError)):
		return 0, err
	case err != nil || b == 0:
		return 0, fmt.Errorf("must be a size above zero such as 4MiB (got %q); leave it out to keep weights whole", n.Value)
	case !strings.ContainsAny(strings.ToLower(n.Value), "kmgtb"):
		// A bare number is a byte count: a fraction of a byte is no size.
		if f, _ := strconv.ParseFloat(strings.TrimSpace(n.Value), 64); f != math.Trunc(f) {
			return 0, fmt.Errorf("must be a whole number of bytes, or a size with a unit such as 4MiB (got %s)", n.Value)
		}
	}
	return b, nil
}

func yamlString(n *yaml.Node) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("must be a string (got %s)", yamlnode.Describe(n))
	}
	return n.Value, nil
}

// bigInt is yamlInt's error for an integer written out in decimal that
// does not fit in 64 bits (YAML reads it as a float): a check with a range
// reports it as outside that range, since it is an integer.
type bigInt struct {
	text string
	neg  bool
}

func (b bigInt) Error() string {
	return fmt.Sprintf("must be an integer that fits in 64 bits (got %s)", b.text)
}

// decimalInt matches an integer written out in decimal.
var decimalInt = regexp.MustCompile(`^[-+]?[0-9]+$`)

// exponentInt matches a number in exponent notation (1e3, 2.5E+4), which
// YAML reads as a float but which people write for large counts.
var exponentInt = regexp.MustCompile(`^[-+]?[0-9]+(\.[0-9]*)?[eE][-+]?[0-9]+$`)

func yamlInt(n *yaml.Node) (int64, error) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!float" {
		big := bigInt{text: n.Value, neg: n.Value[0] == '-'}
		switch {
		case decimalInt.MatchString(n.Value):
			return 0, big
		case exponentInt.MatchString(n.Value):
			// A whole number in exponent notation is that integer: 1e3 is
			// 1000. Beyond 2^53 a float no longer holds every integer, so
			// that is out of range rather than silently rounded.
			f, err := strconv.ParseFloat(n.Value, 64)
			switch {
			case err == nil && math.Abs(f) > 1<<53:
				return 0, big
			case err == nil && f == math.Trunc(f):
				return int64(f), nil
			}
		}
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		return 0, fmt.Errorf("must be an integer (got %s)", yamlnode.Describe(n))
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		return 0, fmt.Errorf("must be an integer that fits in 64 bits (got %s)", yamlnode.Describe(n))
	}
	return v, nil
}

// positiveInt parses an integer ≥ 1 that fits in an int32, the most any
// count in a spec needs.
func positiveInt(n *yaml.Node) (int, error) {
	v, err := yamlInt(n)
	var big bigInt
	if errors.As(err, &big) {
		return 0, fmt.Errorf("must be 1–%d (got %s)", math.MaxInt32, big.text)
	}
	if err != nil {
		return 0, err
	}
	if v < 1 || v > math.MaxInt32 {
		return 0, fmt.Errorf("must be 1–%d (got %d)", math.MaxInt32, v)
	}
	return int(v), nil
}

func yamlFloat(n *yaml.Node) (float64, error) {
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		return 0, fmt.Errorf("must be a number (got %s)", yamlnode.Describe(n))
	}
	var v float64
	if err := n.Decode(&v); err != nil {
		return 0, fmt.Errorf("must be a number (got %s)", yamlnode.Describe(n))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("must be a finite number (got %s)", n.Value)
	}
	return v, nil
}

// countBounds checks a count parsed by yamlInt (its value and error)
// against what an int32 holds, naming the bound that was crossed.
func countBounds(v int64, err error) error {
	var big bigInt
	switch {
	case errors.As(err, &big) && big.neg:
		return fmt.Errorf("must be ≥ 1 (got %s)", big.text)
	case errors.As(err, &big):
		return fmt.Errorf("must be ≤ %d (got %s)", math.MaxInt32, big.text)
	case err != nil:
		return err
	case v < 1:
		return fmt.Errorf("must be ≥ 1 (got %d)", v)
	case v > math.MaxInt32:
		return fmt.Errorf("must be ≤ %d (got %d)", math.MaxInt32, v)
	}
	return nil
}

// parseRange parses an integer, {min, max} or {value}. Problems inside a
// mapping are added to p directly (naming min, max or value) and reported
// as a zero Range with a nil error.
func parseRange(p *problems, path string, n *yaml.Node) (Range, error) {
	if n.Kind == yaml.ScalarNode {
		v, err := yamlInt(n)
		if err != nil && !errors.As(err, new(bigInt)) {
			return Range{}, fmt.Errorf("%v; write a count ≥ 1, or {min, max}", err)
		}
		if err := countBounds(v, err); err != nil {
			return Range{}, err
		}
		return Fixed(int(v)), nil
	}
	fields, err := fieldsOf(p, path, n, rangeKeys)
	if err == errReported {
		return Range{}, nil
	}
	if err != nil {
		return Range{}, fmt.Errorf("must be an integer ≥ 1, or a mapping {min, max} (got %s)", yamlnode.Describe(n))
	}
	vals := map[string]int{}
	good := true
	for _, kv := range fields {
		v, err := yamlInt(yamlnode.Resolve(kv.v))
		if err = countBounds(v, err); err != nil {
			p.add("%s.%s: %v", path, kv.key, err)
			good = false
			continue
		}
		vals[kv.key] = int(v)
	}
	_, hasV := vals["value"]
	_, hasMin := vals["min"]
	_, hasMax := vals["max"]
	switch {
	case !good:
		return Range{}, nil
	case hasV && (hasMin || hasMax):
		p.add("%s: set either value or min and max, not both", path)
		return Range{}, nil
	case hasV:
		return Fixed(vals["value"]), nil
	case hasMin && hasMax:
		return Range{Min: vals["min"], Max: vals["max"]}, nil
	case hasMin || hasMax:
		p.add("%s: set both min and max (or value for a fixed size)", path)
		return Range{}, nil
	}
	if len(fields) == 0 {
		p.add("%s: empty mapping; set min and max, or value", path)
	}
	return Range{}, nil
}

// parseTolerance accepts a percentage string ("10%") or a fraction (0.10).
func parseTolerance(n *yaml.Node) (float64, error) {
	const allowed = `must be 0%–100%, as "10%" or a fraction such as 0.10`
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		s := strings.TrimSpace(n.Value)
		num, ok := strings.CutSuffix(s, "%")
		if !ok {
			return 0, fmt.Errorf("%s (got string %q)", allowed, n.Value)
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
			return 0, fmt.Errorf("%s (got %q)", allowed, n.Value)
		}
		return v / 100, nil
	}
	v, err := yamlFloat(n)
	if err != nil {
		return 0, fmt.Errorf("%s (got %s)", allowed, yamlnode.Describe(n))
	}
	if v < 0 {
		return 0, fmt.Errorf("%s (got %v)", allowed, v)
	}
	if v > 1 {
		return 0, fmt.Errorf("%s (got %v; for %v percent write \"%v%%\")", allowed, v, v, v)
	}
	return v, nil
}

// parseDuration accepts a Go duration string ("5ms") or a number of seconds.
func parseDuration(n *yaml.Node) (float64, error) {
	const allowed = `must be a duration such as "5ms" or "20us", or seconds as a number`
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" {
		d, err := time.ParseDuration(strings.TrimSpace(n.Value))
		if err != nil {
			return 0, fmt.Errorf("%s (got %q)", allowed, n.Value)
		}
		if d < 0 {
			return 0, fmt.Errorf("must not be negative (got %q)", n.Value)
		}
		return d.Seconds(), nil
	}
	v, err := yamlFloat(n)
	if err != nil {
		return 0, fmt.Errorf("%s (got %s)", allowed, yamlnode.Describe(n))
	}
	if v < 0 {
		return 0, fmt.Errorf("must not be negative (got %v)", v)
	}
	return v, nil
}

// parseArrivals fills a from an arrivals mapping and records in given the
// keys it wrote out ("arrivals.seed"), whatever their value.
func parseArrivals(p *problems, path string, n *yaml.Node, a *Arrivals, given map[string]bool) bool {
	fields, err := fieldsOf(p, path, n, arrivalKeys)
	if err == errReported {
		return false
	}
	if err != nil {
		p.add("%s: must be a mapping: {poisson_rate: 50} or {times: [0, 0.1, ...]} (got %s)", path, yamlnode.Describe(n))
		return false
	}
	good := true
	for _, kv := range fields {
		given["arrivals."+kv.key] = true
		v := yamlnode.Resolve(kv.v)
		var err error
		switch kv.key {
		case "poisson_rate":
			a.PoissonRate, err = yamlFloat(v)
		case "seed":
			a.Seed, err = yamlInt(v)
		case "times":
			if v.Kind != yaml.SequenceNode {
				err = fmt.Errorf("must be a list of times in seconds (got %s)", yamlnode.Describe(v))
				break
			}
			a.Times = make([]float64, 0, len(v.Content))
			for i, e := range v.Content {
				t, terr := yamlFloat(yamlnode.Resolve(e))
				if terr != nil {
					p.add("%s.times[%d]: %v", path, i, terr)
					good = false
				}
				a.Times = append(a.Times, t)
			}
		}
		if err != nil {
			p.add("%s.%s: %v", path, kv.key, err)
			good = false
		}
	}
	return good
}

func parseHost(p *problems, path string, n *yaml.Node, h *HostTimes) bool {
	fields, err := fieldsOf(p, path, n, hostKeys)
	if err == errReported {
		return false
	}
	if err != nil {
		p.add("%s: must be a mapping {per_iteration, per_kernel, per_request} of durations (got %s)", path, yamlnode.Describe(n))
		return false
	}
	good := true
	for _, kv := range fields {
		d, err := parseDuration(yamlnode.Resolve(kv.v))
		if err != nil {
			p.add("%s.%s: %v", path, kv.key, err)
			good = false
			continue
		}
		switch kv.key {
		case "per_iteration":
			h.PerIteration = d
		case "per_kernel":
			h.PerKernel = d
		case "per_request":
			h.PerRequest = d
		}
	}
	return good
}

// ---- YAML output ----

// specYAML is the field order and shape a Spec is written in.
type specYAML struct {
	Name          string     `yaml:"name"`
	Model         string     `yaml:"model,omitempty"`
	Trace         string     `yaml:"trace,omitempty"`
	Kind          JobKind    `yaml:"kind"`
	Batch         *Range     `yaml:"batch,omitempty"`
	Iterations    int        `yaml:"iterations,omitempty"`
	TargetSamples int64      `yaml:"target_samples,omitempty"`
	Requests      int        `yaml:"requests,omitempty"`
	Priority      int        `yaml:"priority"`
	Tolerance     float64    `yaml:"tolerance"`
	GPUs          Range      `yaml:"gpus"`
	Device        string     `yaml:"device,omitempty"`
	Arrivals      *Arrivals  `yaml:"arrivals,omitempty"`
	Host          *HostTimes `yaml:"host,omitempty"`
	Seq           int        `yaml:"seq,omitempty"`
	DType         string     `yaml:"dtype,omitempty"`
	ParamChunk    int64      `yaml:"param_chunk,omitempty"`
	Optimizer     string     `yaml:"optimizer,omitempty"`
}

// MarshalYAML writes s in the form ParseSpec reads, with every default
// spelled out, so that parsing the output gives s again.
func (s Spec) MarshalYAML() (any, error) {
	out := specYAML{
		Name: s.Name, Model: s.Model, Trace: s.Trace, Kind: s.Kind,
		Iterations: s.Iterations, TargetSamples: s.TargetSamples, Requests: s.Requests,
		Priority: s.Priority, Tolerance: s.Tolerance, GPUs: s.GPUs, Device: s.Device,
		Arrivals: s.Arrivals, Seq: s.Seq, DType: s.DType,
		ParamChunk: s.ParamChunk, Optimizer: s.Optimizer,
	}
	if s.Batch != (Range{}) {
		b := s.Batch
		out.Batch = &b
	}
	if !s.Host.IsZero() {
		h := s.Host
		out.Host = &h
	}
	return out, nil
}

// MarshalSpecs writes specs as one YAML document with a jobs list, which
// ParseSpecs reads back to the same specs.
func MarshalSpecs(specs []Spec) ([]byte, error) {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(struct {
		Jobs []Spec `yaml:"jobs"`
	}{specs}); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
