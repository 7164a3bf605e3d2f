package fikit

import (
	"encoding/binary"
	"hash/fnv"
	"io"

	"github.com/gpusched/gpusched/workload"
)

// KernelID is a stable identity of the kernel op launches in g: an FNV-1a
// 64-bit hash of the op kind, the shape and dtype of every input and output
// tensor (the byte size stands in for a missing shape), the op's compute
// dtype and its launch configuration. Names, ids and positions do not enter
// it, so the same kernel in two jobs or two layers gets the same id, and the
// value is the same across runs and platforms: integers are hashed as 8-byte
// little-endian values, strings with their length first, and "" dtypes as
// "fp32".
func KernelID(op *workload.Op, g *workload.Graph) uint64 {
	h := fnv.New64a()
	var buf [8]byte
	putInt := func(v int64) {
		binary.LittleEndian.PutUint64(buf[:], uint64(v))
		h.Write(buf[:])
	}
	putStr := func(s string) {
		putInt(int64(len(s)))
		io.WriteString(h, s)
	}
	tensors := func(ids []int) {
		putInt(int64(len(ids)))
		for _, id := range ids {
			if g == nil || id < 0 || id >= len(g.Tensors) {
				putInt(-1)
				continue
			}
			t := &g.Tensors[id]
			if len(t.Shape) == 0 {
				putInt(-2)
				putInt(t.Bytes)
			} else {
				putInt(int64(len(t.Shape)))
				for _, d := range t.Shape {
					putInt(int64(d))
				}
			}
			putStr(normDType(t.DType))
		}
	}
	putStr(op.Kind)
	tensors(op.Inputs)
	tensors(op.Outputs)
	putStr(normDType(op.DType))
	putStr(op.Launch)
	return h.Sum64()
}

func normDType(d string) string {
	if d == "" {
		return "fp32"
	}
	return d
}
