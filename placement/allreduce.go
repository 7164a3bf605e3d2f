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

// RingLinkBandwidth is the bandwidth of the slowest link a ring of replicas
// GPUs spread over nodes nodes crosses: intra on one node; across nodes the
// network (inter), and the intra-node link too where a node holds more than
// one of the replicas (replicas > nodes), whichever is slower (PCIe-only
// nodes on a faster network are limited by PCIe).
func RingLinkBandwidth(nodes, replicas int, intra, inter float64) float64 {
	switch {
	case nodes <= 1:
		return intra
	case replicas > nodes:
		return min(intra, inter)
	}
	return inter
}
