package gpu

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func tinyProfile(capacity int64) Profile {
	p := MustProfile("rtx2080ti-11gb")
	p.Name = "tiny"
	p.MemoryBytes = capacity
	return p
}

func TestSimMemoryAccounting(t *testing.T) {
	s := NewSim(tinyProfile(1000), SimOptions{RecordTimeline: true})
	steps := []struct {
		t     float64
		alloc bool
		key   Key
		bytes int64
		inUse int64
	}{
		{0, true, MakeKey(0, 1), 300, 300},
		{1, true, MakeKey(0, 2), 500, 800},
		{2, false, MakeKey(0, 1), 0, 500},
		{2, true, MakeKey(1, 1), 450, 950},
		{3, false, MakeKey(0, 2), 0, 450},
	}
	for i, st := range steps {
		var err error
		if st.alloc {
			err = s.Alloc(st.t, st.key, st.bytes)
		} else {
			err = s.Free(st.t, st.key)
		}
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := s.InUse(); got != st.inUse {
			t.Fatalf("step %d: in use %d, want %d", i, got, st.inUse)
		}
	}
	if s.HighWater() != 950 {
		t.Fatalf("high water %d, want 950", s.HighWater())
	}
	want := []Sample{{0, 300}, {1, 800}, {2, 950}, {3, 450}}
	got := s.Timeline()
	if len(got) != len(want) {
		t.Fatalf("timeline %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("timeline[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestSimOutOfMemory(t *testing.T) {
	s := NewSim(tinyProfile(1000), SimOptions{})
	if err := s.Alloc(0, MakeKey(0, 1), 800); err != nil {
		t.Fatal(err)
	}
	err := s.Alloc(0.5, MakeKey(2, 7), 300)
	var oom *OOMError
	if !errors.As(err, &oom) {
		t.Fatalf("want OOMError, got %v", err)
	}
	if oom.Request != 300 || oom.Capacity != 1000 || oom.InUse != 800 || oom.Key.Job() != 2 || oom.Key.Tensor() != 7 {
		t.Fatalf("bad OOM fields: %+v", oom)
	}
	for _, want := range []string{"request of 300 B", "capacity 1000 B", "in use 800 B", "job 2 tensor 7"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("OOM message %q lacks %q", err, want)
		}
	}
	if s.InUse() != 800 {
		t.Fatalf("failed allocation changed usage: %d", s.InUse())
	}
}

func TestSimRejectsMisuse(t *testing.T) {
	s := NewSim(tinyProfile(1000), SimOptions{})
	if err := s.Alloc(1, MakeKey(0, 1), 10); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want string
	}{
		{"double alloc", s.Alloc(1, MakeKey(0, 1), 10), "double alloc"},
		{"free unknown", s.Free(1, MakeKey(0, 9)), "not resident"},
		{"time goes back", s.Alloc(0.5, MakeKey(0, 2), 10), "time order"},
		{"negative", s.Alloc(2, MakeKey(0, 3), -1), "negative"},
		{"host free unknown", s.HostFree(2, MakeKey(0, 3)), "no host copy"},
		{"host negative", s.HostAlloc(2, MakeKey(0, 4), -1), "negative"},
	}
	for _, c := range cases {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: got %v, want error containing %q", c.name, c.err, c.want)
		}
	}
	// A refused negative host allocation must not lower the accounted use
	// (it would let later allocations exceed the host capacity).
	if s.HostInUse() != 0 || s.Resident(MakeKey(0, 4)) {
		t.Errorf("host in use %d after refused allocations, want 0", s.HostInUse())
	}
}

func TestSimHostMemory(t *testing.T) {
	s := NewSim(tinyProfile(1000), SimOptions{HostCapacity: 100})
	if err := s.HostAlloc(0, MakeKey(0, 1), 60); err != nil {
		t.Fatal(err)
	}
	var oom *OOMError
	if err := s.HostAlloc(0, MakeKey(0, 2), 60); !errors.As(err, &oom) || oom.Space != "host" {
		t.Fatalf("want host OOM, got %v", err)
	}
	if err := s.HostFree(1, MakeKey(0, 1)); err != nil {
		t.Fatal(err)
	}
	if s.HostInUse() != 0 || s.HostHighWater() != 60 {
		t.Fatalf("host in use %d high %d", s.HostInUse(), s.HostHighWater())
	}
}

func TestSimEnginesAreIndependentQueues(t *testing.T) {
	s := NewSim(tinyProfile(1000), SimOptions{})
	st, en := s.Run(Compute, 0, 2)
	if st != 0 || en != 2 {
		t.Fatalf("compute 1: %v..%v", st, en)
	}
	// Queued behind the first kernel even though ready earlier.
	if st, en = s.Run(Compute, 1, 1); st != 2 || en != 3 {
		t.Fatalf("compute 2: %v..%v", st, en)
	}
	// Copy engines run concurrently with compute.
	if st, en = s.Run(H2D, 0.5, 1); st != 0.5 || en != 1.5 {
		t.Fatalf("h2d: %v..%v", st, en)
	}
	if st, en = s.Run(D2H, 0.5, 1); st != 0.5 || en != 1.5 {
		t.Fatalf("d2h: %v..%v", st, en)
	}
	if s.Busy(Compute) != 3 || s.EngineFree(Compute) != 3 {
		t.Fatalf("compute busy %v free %v", s.Busy(Compute), s.EngineFree(Compute))
	}
}

func TestSimJitterDeterministicAndBounded(t *testing.T) {
	a := NewSim(tinyProfile(1), SimOptions{Jitter: 0.05, Seed: 7})
	b := NewSim(tinyProfile(1), SimOptions{Jitter: 0.05, Seed: 7})
	c := NewSim(tinyProfile(1), SimOptions{Jitter: 0.05, Seed: 8})
	differs := false
	var sum float64
	const n = 2000
	for i := 0; i < n; i++ {
		x, y, z := a.Jittered(1), b.Jittered(1), c.Jittered(1)
		if x != y {
			t.Fatalf("same seed differs at %d: %v vs %v", i, x, y)
		}
		if x != z {
			differs = true
		}
		if x < 0.85-1e-12 || x > 1.15+1e-12 {
			t.Fatalf("jitter beyond 3 sigma: %v", x)
		}
		sum += x
	}
	if !differs {
		t.Fatal("different seeds gave identical streams")
	}
	if mean := sum / n; mean < 0.99 || mean > 1.01 {
		t.Fatalf("jitter mean %v, want about 1", mean)
	}
	if NewSim(tinyProfile(1), SimOptions{}).Jittered(1.25) != 1.25 {
		t.Fatal("zero jitter must be exact")
	}
}

func TestSimResetIsDeterministic(t *testing.T) {
	s := NewSim(tinyProfile(1000), SimOptions{Jitter: 0.1, Seed: 3})
	first := s.Jittered(1)
	_ = s.Alloc(0, MakeKey(0, 0), 10)
	s.Run(Compute, 0, 5)
	s.Reset()
	if s.InUse() != 0 || s.EngineFree(Compute) != 0 || s.Jittered(1) != first {
		t.Fatal("Reset did not restore the initial state")
	}
}

func TestKeyRoundTrip(t *testing.T) {
	for _, c := range []struct{ job, tensor int }{{0, 0}, {3, 12345}, {65535, 1 << 30}} {
		k := MakeKey(c.job, c.tensor)
		if k.Job() != c.job || k.Tensor() != c.tensor {
			t.Errorf("MakeKey(%d,%d) round-trips to (%d,%d)", c.job, c.tensor, k.Job(), k.Tensor())
		}
	}
}

func TestFormatBytes(t *testing.T) {
	for _, c := range []struct {
		in   int64
		want string
	}{{512, "512 B"}, {1536, "1.50 KiB"}, {9771050598, "9.10 GiB"}} {
		if got := FormatBytes(c.in); got != c.want {
			t.Errorf("FormatBytes(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A clone carries on exactly as the original would, and neither sees the
// other's later changes.
func TestSimClone(t *testing.T) {
	p := MustProfile("rtx2080ti-11gb")
	s := NewSim(p, SimOptions{Jitter: 0.1, Seed: 7, RecordTimeline: true})
	if err := s.Alloc(0, MakeKey(0, 1), 100); err != nil {
		t.Fatal(err)
	}
	s.Run(Compute, 0, s.Jittered(1))
	c := s.Clone()
	steps := func(d *Sim) []float64 {
		var out []float64
		if err := d.Alloc(1, MakeKey(0, 2), 50); err != nil {
			t.Fatal(err)
		}
		if err := d.Free(2, MakeKey(0, 1)); err != nil {
			t.Fatal(err)
		}
		_, end := d.Run(Compute, 0, d.Jittered(1))
		return append(out, end, float64(d.InUse()), float64(d.HighWater()), float64(len(d.Timeline())))
	}
	a := steps(s)
	b := steps(c)
	if !slices.Equal(a, b) {
		t.Fatalf("original %v, clone %v", a, b)
	}
	if err := c.Free(3, MakeKey(0, 2)); err != nil {
		t.Fatal(err)
	}
	if !s.Resident(MakeKey(0, 2)) || c.Resident(MakeKey(0, 2)) || s.InUse() != 50 || c.InUse() != 0 {
		t.Fatalf("clone and original share state: original in use %d, clone %d", s.InUse(), c.InUse())
	}
}

// TestSimHugeAllocationIsRefused: a request larger than the free memory is
// refused however large it is; inUse+bytes must not wrap around int64 and
// let it through (a trace may carry any non-negative size).
func TestSimHugeAllocationIsRefused(t *testing.T) {
	const huge = int64(1<<63 - 1)
	s := NewSim(tinyProfile(1000), SimOptions{HostCapacity: 1000})
	if err := s.Alloc(0, MakeKey(0, 1), 800); err != nil {
		t.Fatal(err)
	}
	var oom *OOMError
	if err := s.Alloc(0, MakeKey(0, 2), huge); !errors.As(err, &oom) || oom.Space != "device" {
		t.Errorf("device alloc of %d bytes with 800 of 1000 in use: got %v, want a device OOMError", huge, err)
	}
	if s.InUse() != 800 || s.HighWater() != 800 || s.Resident(MakeKey(0, 2)) {
		t.Errorf("after a refused allocation: in use %d, high water %d, resident %v; want 800, 800, false", s.InUse(), s.HighWater(), s.Resident(MakeKey(0, 2)))
	}
	if err := s.HostAlloc(0, MakeKey(0, 1), 800); err != nil {
		t.Fatal(err)
	}
	if err := s.HostAlloc(0, MakeKey(0, 2), huge); !errors.As(err, &oom) || oom.Space != "host" {
		t.Errorf("host alloc of %d bytes with 800 of 1000 in use: got %v, want a host OOMError", huge, err)
	}
	if s.HostInUse() != 800 || s.HostHighWater() != 800 {
		t.Errorf("after a refused host allocation: host in use %d, high water %d; want 800, 800", s.HostInUse(), s.HostHighWater())
	}
}

// TestSimJitterNeverNegative: a jittered duration stays positive at any
// jitter the options accept, even at the -3σ truncation point.
func TestSimJitterNeverNegative(t *testing.T) {
	for _, j := range []float64{0.3, 0.4, 0.5, 2, math.NaN()} {
		s := NewSim(tinyProfile(1), SimOptions{Jitter: j, Seed: 1})
		for i := 0; i < 20000; i++ {
			if d := s.Jittered(1); !(d > 0) {
				t.Fatalf("Jitter %v: draw %d gives a duration of %v for 1s of work, want > 0", j, i, d)
			}
		}
	}
}
