package placement

// Defaults of the gradient all-reduce model shared by the simulator's zoo
// models and the live runtime's data-parallel replicas: 100 GB/s between GPUs
// of a node (a conservative NVLink-class figure; PCIe-only nodes reach
// ≈ 25 GB/s) and 12.5 GB/s between nodes (one 100 Gb/s link per node).
const (
	DefaultIntraNodeBandwidth = 100e9
	DefaultInterNodeBandwidth = 12.5e9
)

// RingAllReduceSeconds is the time of a ring all-reduce of bytes over
// replicas GPUs: it moves 2(r−1)/r of the bytes through each link in 2(r−1)
// steps over the slowest link the ring crosses (bandwidth, bytes/s), each
// step paying latency seconds (the bandwidth-optimal ring all-reduce,
// J. Parallel Distrib. Comput. 69(2), 2009). Zero for one replica.
func RingAllReduceSeconds(bytes float64, replicas int, bandwidth, latency float64) float64 {
	if replicas <= 1 || bytes <= 0 {
		return 0
	}
	steps := 2 * float64(replicas-1)
	return steps/float64(replicas)*bytes/bandwidth + steps*latency
}
