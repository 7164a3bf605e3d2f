package placement

// ONESConfig configures the ONES policy.
type ONESConfig struct {
	Seed     int64
	Memory   MemoryOracle
	MoveCost float64
	Interval float64
}

// ONES is a placeholder until the evolutionary search lands.
type ONES struct{ FIFO }

// NewONES returns an ONES policy.
func NewONES(cfg ONESConfig) *ONES { return &ONES{} }

// Name implements Policy.
func (*ONES) Name() string { return "ones" }
