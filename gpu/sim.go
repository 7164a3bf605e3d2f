package gpu

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
)

// Engine is one of a GPU's independent execution resources.
type Engine uint8

// Engines: kernels run on Compute; copies run on one host-to-device and one
// device-to-host copy engine, shared by every job on the GPU.
const (
	Compute Engine = iota
	H2D
	D2H
	NumEngines
)

// String returns the engine's name: compute, h2d or d2h.
func (e Engine) String() string {
	switch e {
	case Compute:
		return "compute"
	case H2D:
		return "h2d"
	case D2H:
		return "d2h"
	}
	return fmt.Sprintf("Engine(%d)", e)
}

// Key names one allocation on a device. Executors build it from a job slot
// and a tensor id (see MakeKey) so several jobs can share one device.
type Key uint64

// MakeKey combines a job slot and a tensor id into a Key.
func MakeKey(job int, tensor int) Key { return Key(uint64(uint32(job))<<32 | uint64(uint32(tensor))) }

// Job returns the job slot of k.
func (k Key) Job() int { return int(uint32(k >> 32)) }

// Tensor returns the tensor id of k.
func (k Key) Tensor() int { return int(uint32(k)) }

// OOMError is returned by an allocation that would exceed capacity.
type OOMError struct {
	Space    string // "device" or "host"
	Key      Key
	Request  int64
	Capacity int64
	InUse    int64
	At       float64
}

// Error names the request, the capacity and what is in use.
func (e *OOMError) Error() string {
	return fmt.Sprintf("out of %s memory at t=%.6fs: request of %s for job %d tensor %d; capacity %s, in use %s, free %s",
		e.Space, e.At, FormatBytes(e.Request), e.Key.Job(), e.Key.Tensor(),
		FormatBytes(e.Capacity), FormatBytes(e.InUse), FormatBytes(e.Capacity-e.InUse))
}

// Sample is one point of a memory timeline: bytes in use from time T on.
type Sample struct {
	T     float64 `json:"t"`
	Bytes int64   `json:"bytes"`
}

// Device is what an executor needs from a GPU back-end.
type Device interface {
	Profile() Profile
	// Alloc reserves bytes of device memory for key at virtual time t.
	// Times passed to Alloc and Free must never decrease.
	Alloc(t float64, key Key, bytes int64) error
	// Free releases key's device memory at time t.
	Free(t float64, key Key) error
	// HostAlloc and HostFree account pinned host memory (swap space).
	HostAlloc(t float64, key Key, bytes int64) error
	HostFree(t float64, key Key) error
	// Run occupies engine e for dur seconds, starting no earlier than ready
	// and after the engine's previous work; it returns start and end.
	Run(e Engine, ready, dur float64) (start, end float64)
	// EngineFree is when engine e finishes its queued work.
	EngineFree(e Engine) float64
	// InUse and HighWater report device memory in bytes.
	InUse() int64
	HighWater() int64
}

// SimOptions configure a sim device.
type SimOptions struct {
	// HostCapacity bounds pinned host memory (0 = 1 TiB).
	HostCapacity int64
	// Jitter is the relative standard deviation applied by Jittered
	// (0 = exact durations). Clamped to [0, MaxJitter] so that a duration
	// at the -3σ truncation point stays positive.
	Jitter float64
	// Seed seeds the jitter stream.
	Seed uint64
	// RecordTimeline keeps a memory Sample at every change.
	RecordTimeline bool
}

// Sim is the simulated GPU: a discrete-event model in virtual time with a
// compute engine and separate H2D and D2H copy engines, exact byte
// accounting of device and pinned host memory, and capacity enforced.
// It is deterministic for a given seed and not safe for concurrent use.
type Sim struct {
	prof     Profile
	opts     SimOptions
	engFree  [NumEngines]float64
	busy     [NumEngines]float64
	dev      map[Key]int64
	host     map[Key]int64
	inUse    int64
	hostUse  int64
	high     int64
	hostHigh int64
	lastT    float64
	timeline []Sample
	src      *rand.PCG
	rng      *rand.Rand
}

// MaxJitter is the largest SimOptions.Jitter: 1 - 3×0.3 leaves a kernel
// at least a tenth of its duration (as tensorsched/fikit clamps its own).
const MaxJitter = 0.3

// NewSim returns a sim device for profile p.
func NewSim(p Profile, o SimOptions) *Sim {
	if o.HostCapacity <= 0 {
		o.HostCapacity = 1 << 40
	}
	if !(o.Jitter > 0) { // NaN too
		o.Jitter = 0
	}
	o.Jitter = math.Min(o.Jitter, MaxJitter)
	s := &Sim{prof: p, opts: o}
	s.Reset()
	return s
}

// Reset returns the device to time zero with empty memory, and reseeds jitter.
func (s *Sim) Reset() {
	s.engFree = [NumEngines]float64{}
	s.busy = [NumEngines]float64{}
	s.dev = make(map[Key]int64)
	s.host = make(map[Key]int64)
	s.inUse, s.hostUse, s.high, s.hostHigh, s.lastT = 0, 0, 0, 0, 0
	s.timeline = s.timeline[:0]
	s.src = rand.NewPCG(s.opts.Seed, 0x9e3779b97f4a7c15)
	s.rng = rand.New(s.src)
}

// Clone returns an independent copy of the device as it is now (memory
// contents, engines, high-water marks, timeline and the jitter stream's
// position): from here on the copy and s evolve separately, each exactly
// as s alone would.
func (s *Sim) Clone() *Sim {
	c := *s
	c.dev = maps.Clone(s.dev)
	c.host = maps.Clone(s.host)
	c.timeline = slices.Clone(s.timeline)
	src := *s.src
	c.src = &src
	c.rng = rand.New(c.src)
	return &c
}

// Profile returns the device profile.
func (s *Sim) Profile() Profile { return s.prof }

// Capacity is the device memory capacity in bytes.
func (s *Sim) Capacity() int64 { return s.prof.MemoryBytes }

func (s *Sim) clock(t float64, what string) error {
	if t < s.lastT-1e-12 {
		return fmt.Errorf("sim device: %s at t=%.9f after t=%.9f: memory events must be issued in time order", what, t, s.lastT)
	}
	if t > s.lastT {
		s.lastT = t
	}
	return nil
}

func (s *Sim) record() {
	if !s.opts.RecordTimeline {
		return
	}
	if n := len(s.timeline); n > 0 && s.timeline[n-1].T == s.lastT {
		s.timeline[n-1].Bytes = s.inUse
		return
	}
	s.timeline = append(s.timeline, Sample{T: s.lastT, Bytes: s.inUse})
}

// Alloc implements Device.
func (s *Sim) Alloc(t float64, key Key, bytes int64) error {
	if err := s.clock(t, "alloc"); err != nil {
		return err
	}
	if bytes < 0 {
		return fmt.Errorf("sim device: alloc of negative size %d for job %d tensor %d", bytes, key.Job(), key.Tensor())
	}
	if _, ok := s.dev[key]; ok {
		return fmt.Errorf("sim device: job %d tensor %d is already resident (double alloc)", key.Job(), key.Tensor())
	}
	// Compared with the free memory so that a huge request cannot wrap
	// inUse+bytes around int64 and pass.
	if bytes > s.prof.MemoryBytes-s.inUse {
		return &OOMError{Space: "device", Key: key, Request: bytes, Capacity: s.prof.MemoryBytes, InUse: s.inUse, At: t}
	}
	s.dev[key] = bytes
	s.inUse += bytes
	if s.inUse > s.high {
		s.high = s.inUse
	}
	s.record()
	return nil
}

// Free implements Device.
func (s *Sim) Free(t float64, key Key) error {
	if err := s.clock(t, "free"); err != nil {
		return err
	}
	b, ok := s.dev[key]
	if !ok {
		return fmt.Errorf("sim device: free of job %d tensor %d, which is not resident", key.Job(), key.Tensor())
	}
	delete(s.dev, key)
	s.inUse -= b
	s.record()
	return nil
}

// HostAlloc implements Device.
func (s *Sim) HostAlloc(t float64, key Key, bytes int64) error {
	if err := s.clock(t, "host alloc"); err != nil {
		return err
	}
	if bytes < 0 {
		return fmt.Errorf("sim device: host alloc of negative size %d for job %d tensor %d", bytes, key.Job(), key.Tensor())
	}
	if _, ok := s.host[key]; ok {
		return fmt.Errorf("sim device: job %d tensor %d already has a host copy", key.Job(), key.Tensor())
	}
	if bytes > s.opts.HostCapacity-s.hostUse {
		return &OOMError{Space: "host", Key: key, Request: bytes, Capacity: s.opts.HostCapacity, InUse: s.hostUse, At: t}
	}
	s.host[key] = bytes
	s.hostUse += bytes
	if s.hostUse > s.hostHigh {
		s.hostHigh = s.hostUse
	}
	return nil
}

// HostFree implements Device.
func (s *Sim) HostFree(t float64, key Key) error {
	if err := s.clock(t, "host free"); err != nil {
		return err
	}
	b, ok := s.host[key]
	if !ok {
		return fmt.Errorf("sim device: host free of job %d tensor %d, which has no host copy", key.Job(), key.Tensor())
	}
	delete(s.host, key)
	s.hostUse -= b
	return nil
}

// Run implements Device.
func (s *Sim) Run(e Engine, ready, dur float64) (start, end float64) {
	start = math.Max(ready, s.engFree[e])
	end = start + dur
	s.engFree[e] = end
	s.busy[e] += dur
	return start, end
}

// EngineFree implements Device.
func (s *Sim) EngineFree(e Engine) float64 { return s.engFree[e] }

// Busy is the total time engine e has been occupied.
func (s *Sim) Busy(e Engine) float64 { return s.busy[e] }

// Jittered scales a duration by a seeded random factor (normal, relative
// standard deviation SimOptions.Jitter, truncated at ±3σ).
func (s *Sim) Jittered(d float64) float64 {
	if s.opts.Jitter == 0 {
		return d
	}
	z := s.rng.NormFloat64()
	z = math.Max(-3, math.Min(3, z))
	return d * (1 + s.opts.Jitter*z)
}

// InUse implements Device.
func (s *Sim) InUse() int64 { return s.inUse }

// HighWater implements Device.
func (s *Sim) HighWater() int64 { return s.high }

// HostInUse reports the pinned host memory in use, in bytes.
func (s *Sim) HostInUse() int64 { return s.hostUse }

// HostHighWater reports the most pinned host memory in use at once, in bytes.
func (s *Sim) HostHighWater() int64 { return s.hostHigh }

// Resident reports whether key is in device memory.
func (s *Sim) Resident(key Key) bool { _, ok := s.dev[key]; return ok }

// Timeline returns the recorded memory samples (RecordTimeline must be set).
func (s *Sim) Timeline() []Sample { return s.timeline }

// FormatBytes renders a byte count with a binary unit (e.g. 9.10 GiB).
func FormatBytes(b int64) string {
	const unit = 1024
	if b < unit && b > -unit {
		return fmt.Sprintf("%d B", b)
	}
	v := float64(b)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= unit
		if math.Abs(v) < unit || u == "TiB" {
			return fmt.Sprintf("%.2f %s", v, u)
		}
	}
	return fmt.Sprintf("%d B", b)
}
