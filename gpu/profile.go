// Package gpu holds device profiles, the cost model that turns an op into
// seconds on a device, and device back-ends behind one interface: the sim
// device (a deterministic discrete-event model in virtual time) and GPU
// discovery through NVML.
package gpu

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/gpusched/gpusched/internal/yamlnode"
	"github.com/gpusched/gpusched/workload"
)

// Profile describes one GPU model: what the cost model and the sim device need.
type Profile struct {
	Name string `yaml:"name" json:"name"`
	// MemoryBytes is the device memory usable by jobs.
	MemoryBytes int64 `yaml:"memory_bytes" json:"memory_bytes"`
	// PeakFLOPS is the dense peak per precision (fp32, tf32, bf16, fp16), FLOP/s.
	PeakFLOPS map[string]float64 `yaml:"peak_flops" json:"peak_flops"`
	// MemBandwidth is device memory bandwidth, bytes/s.
	MemBandwidth float64 `yaml:"mem_bandwidth" json:"mem_bandwidth"`
	// H2DBandwidth and D2HBandwidth are pinned host<->device copy bandwidths, bytes/s.
	H2DBandwidth float64 `yaml:"h2d_bandwidth" json:"h2d_bandwidth"`
	D2HBandwidth float64 `yaml:"d2h_bandwidth" json:"d2h_bandwidth"`
	// LaunchOverhead is the fixed cost of one kernel launch, seconds.
	LaunchOverhead float64 `yaml:"launch_overhead" json:"launch_overhead"`
	// MatrixOpOverhead is added to every matrix product (convolutions and
	// matrix multiplies, forward and backward), seconds: the cost beyond
	// flops / peak of products too small to fill the device, fitted from
	// measured kernel times (0 in spec-sheet profiles).
	MatrixOpOverhead float64 `yaml:"matrix_op_overhead,omitempty" json:"matrix_op_overhead,omitempty"`
	// CopyLatency is the fixed cost of one host<->device copy, seconds (0 in
	// spec-sheet profiles).
	CopyLatency float64 `yaml:"copy_latency,omitempty" json:"copy_latency,omitempty"`
	// ComputeEfficiency and MemoryEfficiency scale the peaks to what real
	// kernels achieve (0 < e <= 1).
	ComputeEfficiency float64 `yaml:"compute_efficiency" json:"compute_efficiency"`
	MemoryEfficiency  float64 `yaml:"memory_efficiency" json:"memory_efficiency"`
	// Source says where the figures come from (spec sheet, or a calibration
	// run with its date and numbers).
	Source string `yaml:"source" json:"source"`
}

const (
	gib = int64(1) << 30
	mib = int64(1) << 20
)

// Built-in profiles, from public spec sheets. Memory is what the driver
// reports as usable (nvidia-smi's total), not the marketing figure.
var builtin = map[string]Profile{
	"h100-80gb": {
		Name:        "h100-80gb",
		MemoryBytes: 81559 * mib,
		PeakFLOPS: map[string]float64{
			"fp32": 67e12, "tf32": 494.7e12, "bf16": 989.4e12, "fp16": 989.4e12,
		},
		MemBandwidth:      3.35e12,
		H2DBandwidth:      55e9, // PCIe 5.0 x16, pinned, typical measured
		D2HBandwidth:      55e9,
		LaunchOverhead:    4e-6,
		ComputeEfficiency: 0.6,
		MemoryEfficiency:  0.8,
		Source:            "NVIDIA H100 SXM5 spec sheet (dense); PCIe 5.0 x16 copy bandwidth; not calibrated on a real H100 (gpu/calibration/h100-80gb-from-h200.yaml carries an H200's fit over)",
	},
	"h200-141gb": {
		Name:        "h200-141gb",
		MemoryBytes: 143771 * mib,
		PeakFLOPS: map[string]float64{
			"fp32": 67e12, "tf32": 494.7e12, "bf16": 989.4e12, "fp16": 989.4e12,
		},
		MemBandwidth:      4.8e12,
		H2DBandwidth:      53.94e9,
		D2HBandwidth:      55.7e9,
		CopyLatency:       10.6e-6,
		LaunchOverhead:    1.5e-6,
		MatrixOpOverhead:  32.9e-6,
		ComputeEfficiency: 0.622,
		MemoryEfficiency:  0.364,
		Source:            "NVIDIA H200 SXM spec sheet (dense peaks, memory bandwidth); efficiencies, overheads and copies calibrated on an H200, 2026-11-28: gpu/calibration/h200-2026-11-28.json",
	},
	"a100-40gb": {
		Name:        "a100-40gb",
		MemoryBytes: 40536 * mib,
		PeakFLOPS: map[string]float64{
			"fp32": 19.5e12, "tf32": 156e12, "bf16": 312e12, "fp16": 312e12,
		},
		MemBandwidth:      1.555e12,
		H2DBandwidth:      25e9, // PCIe 4.0 x16, pinned
		D2HBandwidth:      25e9,
		LaunchOverhead:    5e-6,
		ComputeEfficiency: 0.6,
		MemoryEfficiency:  0.8,
		Source:            "NVIDIA A100 40GB spec sheet (dense); PCIe 4.0 x16 copy bandwidth",
	},
	"v100-16gb": {
		Name:        "v100-16gb",
		MemoryBytes: 16160 * mib,
		PeakFLOPS: map[string]float64{
			"fp32": 15.7e12, "tf32": 15.7e12, "bf16": 15.7e12, "fp16": 125e12,
		},
		MemBandwidth:      900e9,
		H2DBandwidth:      12e9, // PCIe 3.0 x16, pinned
		D2HBandwidth:      13e9,
		LaunchOverhead:    6e-6,
		ComputeEfficiency: 0.6,
		MemoryEfficiency:  0.8,
		Source:            "NVIDIA V100 SXM2 16GB spec sheet; no tf32/bf16 units (fp32 used)",
	},
	"rtx2080ti-11gb": {
		Name:        "rtx2080ti-11gb",
		MemoryBytes: 11019 * mib,
		PeakFLOPS: map[string]float64{
			"fp32": 13.45e12, "tf32": 13.45e12, "bf16": 13.45e12, "fp16": 53.8e12,
		},
		MemBandwidth:      616e9,
		H2DBandwidth:      12.5e9, // PCIe 3.0, as measured by TENSILE's authors
		D2HBandwidth:      13.4e9,
		LaunchOverhead:    6e-6,
		ComputeEfficiency: 0.6,
		MemoryEfficiency:  0.8,
		Source:            "NVIDIA RTX 2080 Ti spec sheet; PCIe 3.0 copy bandwidth 12.5 GB/s H2D, 13.4 GB/s D2H",
	},
}

// userProfiles holds the profiles LoadProfiles registered; userMu guards it
// because nodes and the coordinator look profiles up from many goroutines.
var (
	userMu       sync.RWMutex
	userProfiles = map[string]Profile{}
)

// ErrUnknownProfile is returned (wrapped) by LookupProfile.
var ErrUnknownProfile = errors.New("unknown device profile")

// LookupProfile returns a built-in or user-registered profile by name.
func LookupProfile(name string) (Profile, error) {
	userMu.RLock()
	p, ok := userProfiles[name]
	userMu.RUnlock()
	if ok {
		return clone(p), nil
	}
	if p, ok := builtin[name]; ok {
		return clone(p), nil
	}
	known := ProfileNames()
	hint := ""
	if near := workload.Nearest(name, known); near != "" {
		hint = fmt.Sprintf("; did you mean %q?", near)
	}
	return Profile{}, fmt.Errorf("%w %q (known: %s)%s", ErrUnknownProfile, name, strings.Join(known, ", "), hint)
}

// MustProfile is LookupProfile for names known to exist; it panics otherwise.
func MustProfile(name string) Profile {
	p, err := LookupProfile(name)
	if err != nil {
		panic(err)
	}
	return p
}

// ProfileNames lists every known profile name, sorted.
func ProfileNames() []string {
	var n []string
	for k := range builtin {
		n = append(n, k)
	}
	userMu.RLock()
	for k := range userProfiles {
		if _, ok := builtin[k]; !ok {
			n = append(n, k)
		}
	}
	userMu.RUnlock()
	sort.Strings(n)
	return n
}

func clone(p Profile) Profile {
	m := make(map[string]float64, len(p.PeakFLOPS))
	for k, v := range p.PeakFLOPS {
		m[k] = v
	}
	p.PeakFLOPS = m
	return p
}

// unusedPrecisions are peak_flops keys a spec sheet lists that no job's
// dtype selects; a profile may carry them, the cost model ignores them.
var unusedPrecisions = []string{"fp64", "fp8", "int8", "int4"}

// Validate checks that every figure a cost model needs is present and sane,
// returning all problems at once.
func (p Profile) Validate() error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, fmt.Errorf("profile %q: %s: %s", p.Name, field, msg)) }
	if p.Name == "" {
		bad("name", "required (e.g. my-gpu-24gb)")
	}
	if p.MemoryBytes <= 0 {
		bad("memory_bytes", "must be > 0 (bytes of usable device memory)")
	}
	// The comparisons are written so that NaN fails them, and infinities
	// are rejected separately: YAML accepts .nan and .inf as numbers.
	if !(p.PeakFLOPS["fp32"] > 0) || math.IsInf(p.PeakFLOPS["fp32"], 0) {
		bad("peak_flops.fp32", "must be a finite number > 0 FLOP/s")
	}
	precs := make([]string, 0, len(p.PeakFLOPS))
	for k := range p.PeakFLOPS {
		precs = append(precs, k)
	}
	sort.Strings(precs) // report problems in the same order every time
	for _, k := range precs {
		if !slices.Contains(workload.SpecDTypes, k) && !slices.Contains(unusedPrecisions, k) {
			// A misspelt precision would be ignored: its jobs would
			// silently run at fp32's peak.
			bad("peak_flops."+k, "unknown precision; the cost model reads "+strings.Join(workload.SpecDTypes, ", ")+
				" ("+strings.Join(unusedPrecisions, ", ")+" are accepted from spec sheets and unused)")
			continue
		}
		if v := p.PeakFLOPS[k]; k != "fp32" && (!(v >= 0) || math.IsInf(v, 0)) {
			bad("peak_flops."+k, "must be a finite number >= 0 FLOP/s")
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"mem_bandwidth", p.MemBandwidth}, {"h2d_bandwidth", p.H2DBandwidth}, {"d2h_bandwidth", p.D2HBandwidth}} {
		if !(f.v > 0) || math.IsInf(f.v, 0) {
			bad(f.name, "must be a finite number > 0 bytes/s")
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"launch_overhead", p.LaunchOverhead}, {"matrix_op_overhead", p.MatrixOpOverhead}, {"copy_latency", p.CopyLatency}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			bad(f.name, "must be a finite number >= 0 seconds")
		}
	}
	if !(p.ComputeEfficiency > 0 && p.ComputeEfficiency <= 1) {
		bad("compute_efficiency", "must be in (0, 1]")
	}
	if !(p.MemoryEfficiency > 0 && p.MemoryEfficiency <= 1) {
		bad("memory_efficiency", "must be in (0, 1]")
	}
	return errors.Join(errs...)
}

// LoadProfiles reads one or more profiles from a YAML file (a single mapping
// or a list of them), validates them and registers them under their names.
// A user profile may shadow a built-in one.
func LoadProfiles(path string) ([]Profile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ps, err := ParseProfiles(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	userMu.Lock()
	for _, p := range ps {
		userProfiles[p.Name] = clone(p)
	}
	userMu.Unlock()
	return ps, nil
}

// ParseProfiles parses profiles from YAML without registering them. A
// field the profile does not have (a misspelt launch_overhead, say) is an
// error rather than a silent zero.
func ParseProfiles(b []byte) ([]Profile, error) {
	// Two decoders walk the same documents in step: one reads each as a
	// node (its shape, which fields it writes), the other decodes it
	// strictly into profiles.
	nodes := yaml.NewDecoder(bytes.NewReader(b))
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var list []Profile
	for {
		var root yaml.Node
		err := nodes.Decode(&root)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("parse device profile YAML: %w", err)
		}
		if err := checkProfileShapes(&root); err != nil {
			return nil, fmt.Errorf("parse device profile YAML: %w", err)
		}
		ps, err := decodeProfiles(dec, &root)
		if err != nil {
			return nil, fmt.Errorf("parse device profile YAML: %w", err)
		}
		list = append(list, ps...)
	}
	if len(list) == 0 {
		return nil, errors.New("parse device profile YAML: no profile in the document (write a mapping with name, memory_bytes, ... or a list of them)")
	}
	var errs []error
	first := map[string]int{}
	for i := range list {
		if err := list[i].Validate(); err != nil {
			errs = append(errs, err)
		}
		n := list[i].Name
		if j, dup := first[n]; dup && n != "" {
			errs = append(errs, fmt.Errorf("profile %q: name: used twice (profiles %d and %d of the file); give each profile its own name", n, j+1, i+1))
		} else if !dup {
			first[n] = i
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return list, nil
}

// profileFields says what each field of a profile takes, for the errors of
// checkProfileShapes, in the order a profile is written.
var profileFields = []struct{ name, want string }{
	{"name", "a string, such as my-gpu-24gb"},
	{"memory_bytes", "a whole number of bytes (below 2^63), such as 25769803776 for 24 GiB"},
	{"peak_flops", "a mapping of precision to FLOP/s, such as {fp32: 30.3e12, bf16: 121e12}"},
	{"mem_bandwidth", "a number of bytes/s, such as 300e9"},
	{"h2d_bandwidth", "a number of bytes/s, such as 25e9"},
	{"d2h_bandwidth", "a number of bytes/s, such as 25e9"},
	{"launch_overhead", "a number of seconds, such as 5e-6"},
	{"matrix_op_overhead", "a number of seconds, such as 30e-6 (optional, default 0)"},
	{"copy_latency", "a number of seconds, such as 10e-6 (optional, default 0)"},
	{"compute_efficiency", "a number in (0, 1], such as 0.6"},
	{"memory_efficiency", "a number in (0, 1], such as 0.8"},
	{"source", "a string"},
}

// checkProfileShapes reports, with its line and field, each value of a
// document's profiles that cannot be decoded into its field (a string for
// a number, a number too large for memory_bytes) and each unknown field:
// YAML's own errors name only Go types. What it lets through the strict
// decoder still checks.
func checkProfileShapes(root *yaml.Node) error {
	if len(root.Content) == 0 {
		return nil
	}
	var profiles []*yaml.Node
	switch top := yamlnode.Resolve(root.Content[0]); top.Kind {
	case yaml.SequenceNode:
		profiles = top.Content
	case yaml.MappingNode:
		profiles = []*yaml.Node{top}
	}
	var allowed []string
	want := map[string]string{}
	for _, f := range profileFields {
		allowed = append(allowed, f.name)
		want[f.name] = f.want
	}
	var errs []error
	bad := func(v *yaml.Node, field string) {
		errs = append(errs, fmt.Errorf("line %d: %s: must be %s (got %s)", v.Line, field, want[strings.SplitN(field, ".", 2)[0]], yamlnode.Describe(v)))
	}
	for _, m := range profiles {
		if m = yamlnode.Resolve(m); m.Kind != yaml.MappingNode {
			continue
		}
		for i := 0; i+1 < len(m.Content); i += 2 {
			k, v := m.Content[i], yamlnode.Resolve(m.Content[i+1])
			if k.Value == "<<" || v.Tag == "!!null" {
				continue // merge keys and empty values are the decoder's
			}
			switch k.Value {
			case "name", "source":
				if v.Kind != yaml.ScalarNode {
					bad(v, k.Value)
				}
			case "memory_bytes":
				var n int64
				if v.Kind != yaml.ScalarNode || v.Decode(&n) != nil {
					bad(v, k.Value)
				}
			case "peak_flops":
				if v.Kind != yaml.MappingNode {
					bad(v, k.Value)
					continue
				}
				for j := 0; j+1 < len(v.Content); j += 2 {
					if pv := yamlnode.Resolve(v.Content[j+1]); !isNumber(pv) {
						errs = append(errs, fmt.Errorf("line %d: peak_flops.%s: must be a number of FLOP/s, such as 30.3e12 (got %s)", pv.Line, v.Content[j].Value, yamlnode.Describe(pv)))
					}
				}
			default:
				if _, ok := want[k.Value]; !ok {
					errs = append(errs, fmt.Errorf("line %d: unknown field %q (a profile has: %s)", k.Line, k.Value, strings.Join(allowed, ", ")))
				} else if !isNumber(v) {
					bad(v, k.Value)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// isNumber reports whether n decodes as a float64 field would (an empty
// value decodes as 0 for Validate to judge).
func isNumber(n *yaml.Node) bool {
	var f float64
	return n.Kind == yaml.ScalarNode && n.Decode(&f) == nil
}

// decodeProfiles decodes the next document of dec, whose node is root,
// into profiles with the default efficiencies filled in. An empty document
// holds none.
func decodeProfiles(dec *yaml.Decoder, root *yaml.Node) ([]Profile, error) {
	var list []Profile
	var err error
	empty := len(root.Content) == 0 || root.Content[0].Kind == yaml.ScalarNode && root.Content[0].Tag == "!!null"
	switch {
	case empty:
		var skip yaml.Node
		return nil, dec.Decode(&skip)
	case root.Content[0].Kind == yaml.SequenceNode:
		err = dec.Decode(&list)
	default:
		var one Profile
		err = dec.Decode(&one)
		list = []Profile{one}
	}
	if err != nil {
		return nil, err
	}
	// Only an absent efficiency takes the default: a written 0 is a wrong
	// figure for Validate to refuse, not a missing one.
	type efficiencies struct {
		Compute *float64 `yaml:"compute_efficiency"`
		Memory  *float64 `yaml:"memory_efficiency"`
	}
	var written []efficiencies
	if root.Content[0].Kind == yaml.SequenceNode {
		err = root.Content[0].Decode(&written)
	} else {
		written = make([]efficiencies, 1)
		err = root.Content[0].Decode(&written[0])
	}
	if err == nil && len(written) != len(list) {
		err = fmt.Errorf("%d profiles, expected %d", len(written), len(list))
	}
	if err != nil {
		return nil, err
	}
	for i := range list {
		if written[i].Compute == nil {
			list[i].ComputeEfficiency = 0.6
		}
		if written[i].Memory == nil {
			list[i].MemoryEfficiency = 0.8
		}
	}
	return list, nil
}

// Peak returns the peak FLOP/s for a precision, falling back to fp32.
func (p Profile) Peak(dtype string) float64 {
	if dtype == "" {
		dtype = "fp32"
	}
	if v := p.PeakFLOPS[dtype]; v > 0 {
		return v
	}
	return p.PeakFLOPS["fp32"]
}

// OpSeconds is the cost model: launch + max(flops / (peak × efficiency),
// bytes / (bandwidth × efficiency)), plus the matrix-op overhead for a
// matrix product. A positive MeasuredSeconds wins.
func (p Profile) OpSeconds(op *workload.Op) float64 {
	if op.MeasuredSeconds > 0 {
		return op.MeasuredSeconds
	}
	c := op.FLOPs / (p.Peak(op.DType) * p.ComputeEfficiency)
	m := op.MemBytes / (p.MemBandwidth * p.MemoryEfficiency)
	if m > c {
		c = m
	}
	if p.MatrixOpOverhead > 0 && workload.MatrixKind(op.Kind) {
		c += p.MatrixOpOverhead
	}
	return p.LaunchOverhead + c
}

// H2DSeconds is the time to copy n bytes host-to-device on one copy engine.
func (p Profile) H2DSeconds(n int64) float64 {
	return p.CopyLatency + float64(n)/p.H2DBandwidth
}

// D2HSeconds is the time to copy n bytes device-to-host on one copy engine.
func (p Profile) D2HSeconds(n int64) float64 {
	return p.CopyLatency + float64(n)/p.D2HBandwidth
}

// GraphSeconds is the sum of predicted op times of g on p: the vanilla
// iteration time when nothing waits on copies.
func (p Profile) GraphSeconds(g *workload.Graph) float64 {
	var s float64
	for i := range g.Ops {
		s += p.OpSeconds(&g.Ops[i])
	}
	return s
}
