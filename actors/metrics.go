package actors

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gpusched/gpusched/actors/pb"
)

// CoordinatorMetrics are the coordinator's Prometheus metrics.
type CoordinatorMetrics struct {
	Registry         *prometheus.Registry
	Jobs             *prometheus.GaugeVec
	PlacementLatency prometheus.Histogram
	GossipMembers    prometheus.Gauge
	Events           *prometheus.CounterVec
	// ElasticRounds counts the elastic loop's rounds, ElasticOrders the
	// resize and move orders they sent, and ElasticNotApplied the
	// allocations a policy proposed that the coordinator did not order,
	// by reason (see ElasticNotAppliedReasons).
	ElasticRounds     prometheus.Counter
	ElasticOrders     prometheus.Counter
	ElasticNotApplied *prometheus.CounterVec
}

// NotAppliedReason is a reason label of gpusched_elastic_not_applied_total.
type NotAppliedReason string

// The reasons an allocation the elastic policy proposed is not ordered.
const (
	// NotAppliedGPURange: outside the job's GPU range.
	NotAppliedGPURange NotAppliedReason = "gpu_range"
	// NotAppliedNoGPUs: no GPUs could be picked for it (a node too small,
	// GPUs that jobs the policy sees run on and keep, a new GPU beside a
	// higher-priority job that leaves no gaps, or no per-GPU batch in the
	// job's range).
	NotAppliedNoGPUs NotAppliedReason = "no_gpus"
	// NotAppliedGPUDown: a picked GPU went down during the round.
	NotAppliedGPUDown NotAppliedReason = "gpu_down"
	// NotAppliedGPUsChanged: jobs joined the picked GPUs during the round.
	NotAppliedGPUsChanged NotAppliedReason = "gpus_changed"
	// NotAppliedMemory: not even the smallest per-GPU batch fits (a
	// resize_refused event).
	NotAppliedMemory NotAppliedReason = "memory"
	// NotAppliedRefusedBefore: the same change was refused and nothing has
	// left its GPUs since.
	NotAppliedRefusedBefore NotAppliedReason = "refused_before"
	// NotAppliedPlanning: its memory bound waits for a prediction still
	// in progress at the round's deadline (ElasticConfig.PlanWait); the
	// next round decides it.
	NotAppliedPlanning NotAppliedReason = "planning"
	// NotAppliedInFlight: the job's previous order is still being
	// applied (the policy saw the job at its targets and chose otherwise;
	// its job actor would ignore a new order until the first ends).
	NotAppliedInFlight NotAppliedReason = "in_flight"
)

// ElasticNotAppliedReasons are every reason label of
// gpusched_elastic_not_applied_total; each starts at zero.
var ElasticNotAppliedReasons = []NotAppliedReason{
	NotAppliedGPURange, NotAppliedNoGPUs, NotAppliedGPUDown, NotAppliedGPUsChanged, NotAppliedMemory, NotAppliedRefusedBefore, NotAppliedPlanning, NotAppliedInFlight,
}

// NewCoordinatorMetrics registers the coordinator's metrics in a new registry.
func NewCoordinatorMetrics() *CoordinatorMetrics {
	m := &CoordinatorMetrics{
		Registry: prometheus.NewRegistry(),
		Jobs: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "gpusched_jobs", Help: "Jobs known to the coordinator, by state.",
		}, []string{"state"}),
		PlacementLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "gpusched_placement_latency_seconds",
			Help:    "Time to take one placement decision (prediction and best fit).",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12),
		}),
		GossipMembers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpusched_gossip_members", Help: "Live gossip members seen by this process, itself included.",
		}),
		Events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpusched_events_published_total", Help: "Events published on NATS, by type.",
		}, []string{"type"}),
		ElasticRounds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpusched_elastic_rounds_total", Help: "Rounds of the elastic loop (the policy run on the running elastic jobs).",
		}),
		ElasticOrders: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "gpusched_elastic_orders_total", Help: "Resize and move orders the elastic loop sent to job actors.",
		}),
		ElasticNotApplied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpusched_elastic_not_applied_total", Help: "Allocations the elastic policy proposed that the coordinator did not order, by reason.",
		}, []string{"reason"}),
	}
	m.Registry.MustRegister(m.Jobs, m.PlacementLatency, m.GossipMembers, m.Events, m.ElasticRounds, m.ElasticOrders, m.ElasticNotApplied)
	for _, s := range AllStates {
		m.Jobs.WithLabelValues(string(s)).Set(0)
	}
	for _, r := range ElasticNotAppliedReasons {
		m.ElasticNotApplied.WithLabelValues(string(r))
	}
	return m
}

// NodeMetrics are a node's Prometheus metrics.
type NodeMetrics struct {
	Registry     *prometheus.Registry
	MemUsed      *prometheus.GaugeVec
	MemBudgeted  *prometheus.GaugeVec
	MemCapacity  *prometheus.GaugeVec
	MemHighWater *prometheus.GaugeVec
	GPUJobs      *prometheus.GaugeVec
	// JobsWaiting counts the jobs admitted to a GPU that wait for a plan
	// that includes them (they run no iteration until it is installed).
	JobsWaiting *prometheus.GaugeVec
	// PlanSeconds is how long each planning of a GPU's jobs took (wall
	// time on the node: budgets, TENSILE's plans, the checking round,
	// the kernel dispatcher).
	PlanSeconds   *prometheus.HistogramVec
	GossipMembers prometheus.Gauge
}

// NewNodeMetrics registers a node's metrics in a new registry.
func NewNodeMetrics() *NodeMetrics {
	gv := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"gpu"})
	}
	m := &NodeMetrics{
		Registry:     prometheus.NewRegistry(),
		MemUsed:      gv("gpusched_gpu_memory_used_bytes", "Device memory peak of the GPU's current joint plan."),
		MemBudgeted:  gv("gpusched_gpu_memory_budgeted_bytes", "Sum of the memory budgets granted on the GPU."),
		MemCapacity:  gv("gpusched_gpu_memory_capacity_bytes", "Device memory capacity."),
		MemHighWater: gv("gpusched_gpu_memory_high_water_bytes", "Highest device memory use of any plan since start."),
		GPUJobs:      gv("gpusched_gpu_jobs", "Jobs running on the GPU: those of its plan in force (a job admitted meanwhile waits for the next)."),
		JobsWaiting:  gv("gpusched_gpu_jobs_waiting_for_plan", "Jobs admitted to the GPU that wait for a plan including them; they run no iteration until it is installed."),
		PlanSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gpusched_gpu_plan_seconds",
			Help:    "Wall time of each planning of a GPU's jobs (budgets, memory plans, the checking round, kernel dispatch).",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"gpu"}),
		GossipMembers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gpusched_gossip_members", Help: "Live gossip members seen by this process, itself included.",
		}),
	}
	m.Registry.MustRegister(m.MemUsed, m.MemBudgeted, m.MemCapacity, m.MemHighWater, m.GPUJobs, m.JobsWaiting, m.PlanSeconds, m.GossipMembers)
	return m
}

// SetGPU records a device's status; running is how many of its jobs the
// plan in force includes (s.Jobs also lists those admitted and waiting for
// their plan, at no memory and no budget in force: the rest).
func (m *NodeMetrics) SetGPU(s *pb.DeviceStatus, running int) {
	m.MemUsed.WithLabelValues(s.Gpu).Set(float64(s.UsedBytes))
	m.MemBudgeted.WithLabelValues(s.Gpu).Set(float64(s.Budgeted))
	m.MemCapacity.WithLabelValues(s.Gpu).Set(float64(s.Capacity))
	m.MemHighWater.WithLabelValues(s.Gpu).Set(float64(s.HighWater))
	m.GPUJobs.WithLabelValues(s.Gpu).Set(float64(running))
	m.JobsWaiting.WithLabelValues(s.Gpu).Set(float64(len(s.Jobs) - running))
}

// metricsStopGrace is how long stopping the metrics server waits for
// scrapes in flight before it closes their connections.
const metricsStopGrace = 200 * time.Millisecond

// ServeMetrics serves reg on addr at /metrics until the returned stop
// function is called. An empty addr serves nothing.
func ServeMetrics(addr string, reg *prometheus.Registry) (stop func(), bound string, err error) {
	if addr == "" {
		return func() {}, "", nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, "", err
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			_ = err
		}
	}()
	return func() {
		// A scrape in flight gets a moment to finish; then every
		// connection is closed, also one that sent no request (Shutdown
		// alone waits for it until its context ends, and leaves it open).
		c, cancel := context.WithTimeout(context.Background(), metricsStopGrace)
		defer cancel()
		if srv.Shutdown(c) != nil {
			_ = srv.Close()
		}
		// Serve may not have taken the listener yet: close it here, so
		// the address is free when stop returns.
		_ = ln.Close()
	}, ln.Addr().String(), nil
}
