package workload

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"tib", 1 << 40}, {"gib", 1 << 30}, {"mib", 1 << 20}, {"kib", 1 << 10},
	{"tb", 1e12}, {"gb", 1e9}, {"mb", 1e6}, {"kb", 1e3}, {"b", 1},
}

// TooManyBytesError is ParseBytes's error for a size beyond an int64.
type TooManyBytesError string

func (e TooManyBytesError) Error() string {
	return fmt.Sprintf("%q is more bytes than a size can hold (use e.g. 4GiB, 512MiB, 2GB)", string(e))
}

// ParseBytes reads a byte count with an optional unit, binary (KiB to TiB)
// or decimal (kB to TB), case-insensitive: 4GiB, 512MiB, 2GB, 1000.
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range byteUnits {
		if v, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(v), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil || !(f >= 0) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a size (use e.g. 4GiB, 512MiB, 2GB)", s)
	}
	if f*mult >= math.MaxInt64 {
		return 0, TooManyBytesError(s)
	}
	return int64(f * mult), nil
}
