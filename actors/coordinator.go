package actors

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/gpusched/gpusched/actors/pb"
	"github.com/gpusched/gpusched/gpu"
	"github.com/gpusched/gpusched/placement"
	"github.com/gpusched/gpusched/transport"
	"github.com/gpusched/gpusched/workload"
)

// CoordinatorActorName is the coordinator actor's id; job actors are its
// children ("coordinator/job-j-1", ...).
const CoordinatorActorName = "coordinator"

// Requests to the coordinator actor (same process).
type (
	submitReq  struct{ specs []workload.Spec }
	submitResp struct {
		jobs []SubmittedJob
	}
	statusReq struct{ id string }
	listReq   struct{}
	cancelReq struct{ id string }
	nodesReq  struct{}
	gpusReq   struct{}
	memberEv  struct{ ev transport.MemberEvent }
)

// SubmittedJob is one job accepted by submit.
type SubmittedJob struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// NodeInfo is a node as the coordinator sees it.
type NodeInfo struct {
	Name       string `json:"name"`
	Address    string `json:"address"` // actor address
	Gossip     string `json:"gossip"`
	State      string `json:"state"` // alive, suspect, dead, left
	GPUs       int    `json:"gpus"`
	DeviceType string `json:"device_type"`
}

// GPUInfo is one GPU in placement's view.
type GPUInfo struct {
	ID         string   `json:"id"`
	Node       string   `json:"node"`
	DeviceType string   `json:"device_type"`
	Capacity   int64    `json:"capacity"`
	Reserved   int64    `json:"reserved"` // sum of minimum budgets placed here
	Jobs       []string `json:"jobs"`
	Down       bool     `json:"down,omitempty"`
}

type nodeEntry struct {
	info NodeInfo
}

type coordActor struct {
	store   *transport.Store
	pub     *transport.Publisher
	pred    Predictor
	metrics *CoordinatorMetrics
	log     *slog.Logger
	// sends carries its timers' and background work's messages to it
	// until it stops (selfsend.go); a restart keeps the actor, and them.
	sends selfSends
	// listJobs lists the store's job keys; budgetTimeout is how long a
	// job actor waits for a device to answer its budget request
	// (CoordinatorConfig's seams, defaults filled in).
	listJobs      func(*transport.Store) ([]string, error)
	budgetTimeout time.Duration
	// tls: this coordinator's actor port requires mutual TLS; a node
	// gossiping the other setting is ignored (see onMember).
	tls bool
	// strategy is how placement picks among GPUs with room
	// (CoordinatorConfig.Placement).
	strategy placement.Strategy

	recs      map[string]*JobRecord
	pids      map[string]*actor.PID
	waiting   map[string]bool
	nodes     map[string]*nodeEntry
	gpus      []placement.FitGPU
	orphans   map[string][]placement.FitJob // reservations on GPUs not (yet) joined
	nextSeq   uint64
	reasons   map[string]string
	recovered chan<- recovery
	elastic   *elasticLoop // elastic.go; nil: no elastic loop
	// refused records the GPUs whose devices refused a job (job → GPU);
	// gpuGen counts, per GPU, the times a running job left it. A refusal
	// holds while its GPU's count has not moved: the GPU is not offered
	// to that job again until something there changes.
	refused map[string]map[string]refusal
	gpuGen  map[string]uint64
	// starved records the jobs moved off a GPU they were starved on
	// (job → that GPU while the move is under way; "" after), so a move
	// is asked once, and such a job is placed where no job outranks it
	// when a GPU like that has room (see unstarve).
	starved map[string]string
	// starving records, per GPU, the highest priority a job was starved at
	// there and the GPU's generation then: until a job leaves it, jobs of
	// that priority or lower are placed elsewhere when they fit elsewhere.
	starving map[string]starvation
	// demands caches memory-demand predictions by demandKey; a nil entry
	// is one being made (off the actor: see demand).
	demands map[string]*predicted
	predSem chan struct{}
}

func (c *coordActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		c.recoverFromStore(ctx)
		c.startElastic(ctx)
	case *actor.Stopping:
		c.sends.stop()
	case *retryRecovery:
		c.recoverFromStore(ctx)
	case *elasticTick, *elasticResult, *elasticNow, *orderDropped: // elastic.go
		c.onElastic(ctx, m)
	case *pb.Crash: // fault injection, as for device and job actors
		panic(fmt.Sprintf("coordinator: crash requested: %s", m.Reason))
	case *submitReq:
		ctx.Respond(c.submit(ctx, m.specs))
	case *placeMe:
		if r := c.recs[m.id]; r != nil && r.State == StatePending {
			c.waiting[m.id] = true
			c.tryPlace(ctx)
		}
	case *jobUpdate:
		c.onUpdate(ctx, m)
	case *predicted:
		if m.owner != c {
			return // made for a coordinator stopped before this one started
		}
		c.demands[m.key] = m
		c.tryPlace(ctx)
	case *memberEv:
		c.onMember(ctx, m.ev)
	case *deviceReq: // job.go
		ctx.Respond(c.deviceOf(m.gpu))
	case *recordReq: // job.go
		if r := c.recs[m.id]; r != nil {
			ctx.Respond(r.clone())
		} else {
			ctx.Respond((*JobRecord)(nil))
		}
	case *statusReq:
		r, ok := c.recs[m.id]
		if !ok {
			ctx.Respond(fmt.Errorf("no job %q (list jobs with `coordinator list`)", m.id))
			return
		}
		ctx.Respond(r.clone())
	case *listReq:
		out := make([]*JobRecord, 0, len(c.recs))
		for _, r := range c.recs {
			out = append(out, r.clone())
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
		ctx.Respond(out)
	case *cancelReq:
		r, ok := c.recs[m.id]
		if !ok {
			ctx.Respond(fmt.Errorf("no job %q (list jobs with `coordinator list`)", m.id))
			return
		}
		if r.State.Terminal() {
			ctx.Respond(fmt.Errorf("job %s is already %s", m.id, r.State))
			return
		}
		delete(c.waiting, m.id)
		if pid := c.pids[m.id]; pid != nil {
			ctx.Send(pid, &cancelJob{})
		}
		ctx.Respond(r.clone())
	case *nodesReq:
		out := make([]NodeInfo, 0, len(c.nodes))
		for _, n := range c.nodes {
			out = append(out, n.info)
		}
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
		ctx.Respond(out)
	case *gpusReq:
		out := make([]GPUInfo, 0, len(c.gpus))
		for i := range c.gpus {
			g := &c.gpus[i]
			gi := GPUInfo{ID: g.ID, Node: g.Node, DeviceType: g.DeviceType, Capacity: g.Capacity, Reserved: g.Reserved(), Down: g.Down, Jobs: []string{}}
			for _, j := range g.Jobs {
				gi.Jobs = append(gi.Jobs, j.ID)
			}
			out = append(out, gi)
		}
		ctx.Respond(out)
	case *actor.Terminated:
		for id, pid := range c.pids {
			if pid.Equal(m.Who) {
				delete(c.pids, id)
			}
		}
	}
}

// recovery is what a start recovered from the store: the unfinished jobs
// rebuilt, or why the stored jobs could not be read.
type recovery struct {
	n   int
	err error
}

// retryRecovery asks the coordinator to read the stored jobs again after
// a restart on which they could not be listed.
type retryRecovery struct{}

func (c *coordActor) recoverFromStore(ctx actor.Context) {
	keys, err := c.listJobs(c.store)
	if err != nil {
		if c.recovered != nil {
			// At start nothing is running yet: refuse to start rather
			// than number new jobs from 1 over the stored ones.
			c.recovered <- recovery{err: fmt.Errorf("coordinator: cannot list the stored jobs: %w; nothing was recovered or changed: check the NATS server (JetStream) and start again", err)}
			c.recovered = nil
			return
		}
		// After a crash the actor keeps its records and job numbers; the
		// listing is tried again in a second.
		c.log.Error("recover: list jobs; trying again in 1s", "err", err)
		c.sends.after(ctx, time.Second, &retryRecovery{})
		return
	}
	// The reservations are rebuilt from the records. After a crash the
	// actor keeps its state, but the job actors were stopped, and with
	// them any assignment they had not taken yet: its reservation goes.
	for i := range c.gpus {
		c.gpus[i].Jobs = nil
	}
	clear(c.orphans)
	n := 0
	for _, k := range keys {
		// New jobs are numbered after every stored key, so that a record
		// skipped below (unreadable, garbled) is never overwritten by the
		// next submission taking its id.
		if id, ok := strings.CutPrefix(k, JobKey("")); ok && ValidJobID(id) {
			if seq, err := strconv.ParseUint(id[2:], 10, 64); err == nil && seq > c.nextSeq {
				c.nextSeq = seq
			}
		}
		b, err := c.store.Get(k)
		if errors.Is(err, transport.ErrNotFound) {
			continue // deleted since it was listed
		}
		if err != nil && c.recovered != nil {
			c.recovered <- recovery{err: fmt.Errorf("coordinator: cannot read the stored job %s: %w; nothing was recovered or changed: check the NATS server (JetStream) and start again", k, err)}
			c.recovered = nil
			return
		}
		if err != nil {
			c.log.Error("recover: skipping a job record that cannot be read", "key", k, "err", err)
			continue
		}
		r, err := decodeRecord(b)
		if err != nil {
			c.log.Error("recover: skipping bad record", "key", k, "err", err)
			continue
		}
		c.recs[r.ID] = r
		if r.Seq > c.nextSeq {
			c.nextSeq = r.Seq
		}
		if r.State.Terminal() {
			continue
		}
		c.reserveRecord(r)
		// After a crash (no start waits for this recovery), the job
		// actors stopped with it may have left updates in the mailbox,
		// handled after this: the new ones ask for their records.
		c.spawnJob(ctx, r.ID, c.recovered == nil)
		n++
	}
	if n > 0 {
		c.log.Info("recovered jobs from the store", "active", n, "total", len(c.recs))
	}
	c.setJobMetrics()
	if c.recovered != nil {
		// Only the first start is waited for (StartCoordinator reads
		// the one slot once); a restart after a crash must not block.
		c.recovered <- recovery{n: n}
		c.recovered = nil
	}
}

func (c *coordActor) spawnJob(ctx actor.Context, id string, afterCrash bool) {
	pid, err := ctx.SpawnNamed(newJobProps(id, ctx.Self(), c.store, c.log, c.budgetTimeout, afterCrash), JobActorName(id))
	if err != nil {
		c.log.Error("spawn job actor", "job", id, "err", err)
		return
	}
	c.pids[id] = pid
}

func (c *coordActor) submit(ctx actor.Context, specs []workload.Spec) any {
	resp := &submitResp{}
	for i := range specs {
		c.nextSeq++
		id := JobID(c.nextSeq)
		r := &JobRecord{ID: id, Seq: c.nextSeq, Spec: specs[i], State: StatePending, SubmittedAt: time.Now().UTC(),
			Total: RunSpec(id, &specs[i]).Iterations, Reason: "waiting for placement"}
		b, err := encodeRecord(r)
		if err == nil {
			err = c.store.Put(JobKey(id), b)
		}
		if err != nil {
			c.nextSeq--
			return fmt.Errorf("store job %s: %w (nothing was submitted after %d job(s))", specs[i].Name, err, len(resp.jobs))
		}
		c.recs[id] = r
		c.publish(transport.Event{Type: transport.EvSubmitted, Job: id, Name: r.Spec.Name, Total: r.Total})
		c.spawnJob(ctx, id, false)
		resp.jobs = append(resp.jobs, SubmittedJob{ID: id, Name: r.Spec.Name})
	}
	c.setJobMetrics()
	return resp
}

func (c *coordActor) publish(e transport.Event) {
	if _, err := c.pub.Publish(e); err != nil {
		c.log.Warn("publish event", "type", e.Type, "err", err)
		return
	}
	if c.metrics != nil {
		c.metrics.Events.WithLabelValues(e.Type).Inc()
	}
}

// starvation is a GPU seen starving jobs of priority prio and below, valid
// while one of the jobs that outranked the starved job (by) still runs
// there.
type starvation struct {
	prio int
	by   []string
}

func (sv starvation) holds(g *placement.FitGPU) bool {
	for _, j := range g.Jobs {
		if slices.Contains(sv.by, j.ID) {
			return true
		}
	}
	return false
}

// avoidStarving is gpus with those marked down where a job of priority
// prio was seen starved since they last changed (see unstarve).
func (c *coordActor) avoidStarving(gpus []placement.FitGPU, prio int) ([]placement.FitGPU, bool) {
	out, any := gpus, false
	for i := range gpus {
		sv, ok := c.starving[gpus[i].ID]
		if !ok || prio > sv.prio || !sv.holds(&gpus[i]) {
			continue
		}
		if !any {
			out = make([]placement.FitGPU, len(gpus))
			copy(out, gpus)
			any = true
		}
		out[i].Down = true
	}
	return out, any
}

// refusal is a device's refusal of a job, valid while gen is its GPU's
// generation.
type refusal struct {
	reason string
	gen    uint64
}

func (c *coordActor) onUpdate(ctx actor.Context, m *jobUpdate) {
	r := m.rec
	if _, err := encodeRecord(r); err != nil {
		// The job actors refuse garbled reports, so this is a bug; the
		// last good record stays (in the store too) and nothing acts on
		// this one.
		c.log.Error("job update not applied: its record cannot be stored", "job", r.ID, "state", r.State, "err", err)
		return
	}
	prev := c.recs[r.ID]
	if prev != nil && prev.State == StateRunning {
		for _, g := range prev.AllGPUs() {
			if r.State.Terminal() || !slices.Contains(r.AllGPUs(), g) {
				// A job that ran there left: its neighbours may grow, and
				// jobs that GPU refused may fit now.
				c.bumpGPU(g)
			}
		}
	}
	freed := false
	if (r.State == StatePlaced || r.State == StateRunning) && (prev == nil || prev.State == StatePending || !slices.Equal(prev.AllGPUs(), r.AllGPUs())) {
		// Placed, or an elastic change moved it or changed its GPU count:
		// its reservations are the GPUs it runs on (a placement it did not
		// take, made while its assignment was on its way, goes). The room
		// of a GPU it left is offered to the jobs waiting.
		freed = c.reserveRecord(r)
	} else if r.State == StateRunning && prev != nil && prev.State == StateRunning && r.MinBudget > 0 && r.MinBudget < prev.MinBudget {
		// An elastic change shrank it in place (a smaller batch on the same
		// GPUs): its reservations take its lower minimum, and the room it
		// gave back is offered to the jobs waiting.
		c.reserveRecord(r)
		freed = true
	}
	if r.State.Terminal() {
		delete(c.refused, r.ID)
	} else if m.refusedBy != "" {
		if c.refused == nil {
			c.refused = map[string]map[string]refusal{}
		}
		if c.refused[r.ID] == nil {
			c.refused[r.ID] = map[string]refusal{}
		}
		c.refused[r.ID][m.refusedBy] = refusal{reason: r.Reason, gen: c.gpuGen[m.refusedBy]}
	}
	c.followAttained(r)
	c.recordAttained(r)
	c.recs[r.ID] = r
	// Encoded again: recordAttained has added to r since the check.
	stored, err := encodeRecord(r)
	if err == nil {
		err = c.store.Put(JobKey(r.ID), stored)
	}
	if err != nil {
		c.log.Warn("checkpoint job", "job", r.ID, "err", err)
	}
	if m.ev != nil {
		c.publish(*m.ev)
	}
	c.elasticObserve(r)
	c.elasticRefused(m.ev)
	c.unstarve(ctx, r, m.ev)
	if r.State.Terminal() || (r.State == StatePending && prev != nil && prev.GPU != "") {
		if c.unreserve(r.ID) {
			freed = true
		}
		if r.State.Terminal() {
			delete(c.waiting, r.ID)
			delete(c.starved, r.ID)
		}
	}
	if freed {
		c.tryPlace(ctx)
	}
	c.setJobMetrics()
}

// bumpGPU records that something left a GPU, lifting the refusals made there.
func (c *coordActor) bumpGPU(id string) {
	if c.gpuGen == nil {
		c.gpuGen = map[string]uint64{}
	}
	c.gpuGen[id]++
}

// refusedBy returns the GPUs that refused job id and have not changed since.
func (c *coordActor) refusedBy(id string) map[string]refusal {
	out := map[string]refusal{}
	for g, rf := range c.refused[id] {
		if rf.gen == c.gpuGen[g] {
			out[g] = rf
		} else {
			delete(c.refused[id], g)
		}
	}
	return out
}

// reserveRecord makes the job's reservations the GPUs its record names: a
// replica's minimum budget on each, kept for a GPU not joined (yet) until
// it joins. It reports whether the job left a GPU it had a reservation on.
func (c *coordActor) reserveRecord(r *JobRecord) (freed bool) {
	held := map[string]int{}
	for i := range c.gpus {
		for _, j := range c.gpus[i].Jobs {
			if j.ID == r.ID {
				held[c.gpus[i].ID]++
			}
		}
	}
	for _, id := range r.AllGPUs() {
		held[id]--
	}
	for _, n := range held {
		freed = freed || n > 0
	}
	c.unreserve(r.ID)
	fj := placement.FitJob{ID: r.ID, Min: r.MinBudget, Vanilla: r.VanillaPeak, Priority: r.Spec.Priority}
	for _, id := range r.AllGPUs() {
		if g := c.fitGPU(id); g != nil {
			g.Jobs = append(g.Jobs, fj)
		} else {
			c.orphans[id] = append(c.orphans[id], fj)
		}
	}
	return freed
}

// unreserve drops the job's reservations (one per replica) and reports
// whether it had any.
func (c *coordActor) unreserve(id string) bool {
	found := false
	drop := func(js []placement.FitJob) []placement.FitJob {
		kept := js[:0]
		for _, j := range js {
			if j.ID == id {
				found = true
				continue
			}
			kept = append(kept, j)
		}
		return kept
	}
	for i := range c.gpus {
		c.gpus[i].Jobs = drop(c.gpus[i].Jobs)
	}
	for gid, js := range c.orphans {
		c.orphans[gid] = drop(js)
	}
	return found
}

func (c *coordActor) setJobMetrics() {
	if c.metrics == nil {
		return
	}
	counts := map[JobState]int{}
	for _, r := range c.recs {
		counts[r.State]++
	}
	for _, s := range AllStates {
		c.metrics.Jobs.WithLabelValues(string(s)).Set(float64(counts[s]))
	}
}

// tryPlace places waiting jobs, highest priority first, then oldest.
func (c *coordActor) tryPlace(ctx actor.Context) {
	if len(c.waiting) == 0 {
		return
	}
	ids := make([]string, 0, len(c.waiting))
	for id := range c.waiting {
		ids = append(ids, id)
	}
	placement.FitOrder(ids, func(id string) int { return c.recs[id].Spec.Priority }, func(id string) uint64 { return c.recs[id].Seq })
	types := c.deviceTypes()
	for _, id := range ids {
		r := c.recs[id]
		pid := c.pids[id]
		if r == nil || pid == nil || r.State != StatePending {
			delete(c.waiting, id)
			continue
		}
		start := time.Now()
		req, demands, predicting, predErr := c.fitRequest(ctx, r, types)
		if len(predicting) > 0 {
			sort.Strings(predicting)
			ctx.Send(pid, &waitReason{reason: "predicting its memory demand on " + strings.Join(predicting, ", ")})
			continue
		}
		if len(types) > 0 && len(demands) == 0 && predErr != nil {
			delete(c.waiting, id)
			ctx.Send(pid, &failJob{reason: fmt.Sprintf("cannot predict memory demand: %v", predErr)})
			continue
		}
		refused := c.refusedBy(id)
		gpus := c.candidates(refused, demands, len(types))
		var dec placement.FitDecision
		if _, was := c.starved[id]; was {
			// It was starved beside a higher priority: a GPU where no job
			// outranks it comes first.
			dec = placement.Fit(withoutOutranking(gpus, r.Spec.Priority), req)
		}
		// A GPU that starved a job of its priority would starve it too: it
		// is left out also when no higher-priority training job runs there
		// (the job that starved it may be a busy inference service).
		view, any := c.avoidStarving(gpus, r.Spec.Priority)
		if !dec.OK {
			dec = placement.Fit(c.withoutOutrankingBusy(view, r.Spec.Priority), req)
		}
		if !dec.OK && any {
			dec = placement.Fit(view, req)
		}
		if !dec.OK {
			dec = placement.Fit(gpus, req)
		}
		if c.metrics != nil {
			c.metrics.PlacementLatency.Observe(time.Since(start).Seconds())
		}
		if !dec.OK {
			reason := dec.Reason
			if r.Spec.Device != "" && len(demands) == 0 {
				reason = fmt.Sprintf("no GPU of the requested device type %s has joined", r.Spec.Device)
			} else if len(refused) > 0 {
				reason = refusedReason(refused, reason)
			}
			ctx.Send(pid, &waitReason{reason: reason})
			continue
		}
		g := &c.gpus[dec.Index]
		d := demands[g.DeviceType]
		g.Jobs = append(g.Jobs, placement.FitJob{ID: id, Min: d.MinBudget, Vanilla: d.VanillaPeak, Priority: r.Spec.Priority})
		delete(c.waiting, id)
		ctx.Send(pid, &assign{gpu: g.ID, node: g.Node, device: c.devicePID(g), demand: d})
	}
}

// deviceTypes is the set of device types of the cluster's GPUs.
func (c *coordActor) deviceTypes() map[string]bool {
	types := map[string]bool{}
	for i := range c.gpus {
		types[c.gpus[i].DeviceType] = true
	}
	return types
}

// fitRequest is placement's request for job r on the device types given:
// its demand on each type its spec allows (demands, and req.PerType), the
// types whose prediction is still being made, and the last prediction
// error.
func (c *coordActor) fitRequest(ctx actor.Context, r *JobRecord, types map[string]bool) (req placement.FitRequest, demands map[string]*pb.Demand, predicting []string, predErr error) {
	req = placement.FitRequest{ID: r.ID, Priority: r.Spec.Priority, Tolerance: r.Spec.Tolerance, Strategy: c.strategy, PerType: map[string]placement.Demand{}}
	demands = map[string]*pb.Demand{}
	spec := RunSpec(r.ID, &r.Spec)
	for t := range types {
		if r.Spec.Device != "" && r.Spec.Device != t {
			continue
		}
		p, ok := c.demand(ctx, spec, t)
		switch {
		case !ok:
			predicting = append(predicting, t)
			continue
		case p.err != nil:
			predErr = p.err
			continue
		}
		demands[t] = p.pred.Demand
		req.PerType[t] = placement.Demand{Min: p.pred.Demand.MinBudget, Vanilla: p.pred.Demand.VanillaPeak}
	}
	return req, demands, predicting, predErr
}

// candidates is the cluster's GPUs as candidates for a job: only GPUs of a
// type the job's demand is known on (Fit would take an unknown one as zero;
// demands holds only the preferred type when the spec names one), and that
// have not refused the job since they last changed. The cluster's own slice
// when all are (ntypes: the number of device types there).
func (c *coordActor) candidates(refused map[string]refusal, demands map[string]*pb.Demand, ntypes int) []placement.FitGPU {
	if len(refused) == 0 && len(demands) >= ntypes {
		return c.gpus
	}
	gpus := make([]placement.FitGPU, len(c.gpus))
	copy(gpus, c.gpus)
	for i := range gpus {
		_, no := refused[gpus[i].ID]
		if no || demands[gpus[i].DeviceType] == nil {
			gpus[i].Down = true
		}
	}
	return gpus
}

// withoutOutranking is gpus with those that run a job of a higher priority
// than prio marked down.
func withoutOutranking(gpus []placement.FitGPU, prio int) []placement.FitGPU {
	return markOutranked(gpus, prio, func(placement.FitJob) bool { return true })
}

// markOutranked is gpus (copied) with those marked down that run a job of a
// higher priority than prio for which counts holds.
func markOutranked(gpus []placement.FitGPU, prio int, counts func(placement.FitJob) bool) []placement.FitGPU {
	out := make([]placement.FitGPU, len(gpus))
	copy(out, gpus)
	for i := range out {
		if outranks(&out[i], prio, counts) {
			out[i].Down = true
		}
	}
	return out
}

// outranks says whether g runs a job of a higher priority than prio for
// which counts holds.
func outranks(g *placement.FitGPU, prio int, counts func(placement.FitJob) bool) bool {
	for _, j := range g.Jobs {
		if j.Priority > prio && counts(j) {
			return true
		}
	}
	return false
}

// withoutOutrankingBusy is gpus with those marked down that run a job of
// a higher priority than prio that leaves no kernel gaps (leavesNoGaps).
func (c *coordActor) withoutOutrankingBusy(gpus []placement.FitGPU, prio int) []placement.FitGPU {
	return markOutranked(gpus, prio, func(j placement.FitJob) bool { return c.leavesNoGaps(j.ID) })
}

// leavesNoGaps says whether job id is known and keeps its GPU busy without
// the gaps a lower priority's kernels run in: a training job, or an
// inference service whose requests come back to back (no arrival process).
// A service with arrivals leaves the time between its requests; one busier
// than its rate says is found when it starves a neighbour (unstarve).
func (c *coordActor) leavesNoGaps(id string) bool {
	r := c.recs[id]
	return r != nil && (r.Spec.Kind != workload.Infer || arrivalRate(&r.Spec) == 0)
}

// unstarve moves a job off the GPU it is starved on. The kernel dispatcher
// gives a job no time when a higher-priority neighbour leaves no gap its
// kernels fit in (its progress reports iteration time 0); placement's best
// fit may have put it there while another GPU had room, and it would wait
// there, holding its memory, until the neighbour ends. When another GPU
// where no job outranks it has room for it now, the job is requeued from
// its checkpoint (it made no progress to lose) and that GPU is not offered
// to it again until something leaves it. A report from a GPU where no job
// outranks it (one made before its neighbour left) moves nothing. Elastic
// jobs are left to the elastic loop.
func (c *coordActor) unstarve(ctx actor.Context, r *JobRecord, ev *transport.Event) {
	if on, moving := c.starved[r.ID]; moving && on != "" && (r.State != StateRunning || r.GPU != on) {
		c.starved[r.ID] = "" // the move happened (or the job left that GPU otherwise)
	}
	if ev == nil || ev.Type != transport.EvProgress || ev.IterSeconds != 0 || r.State != StateRunning ||
		r.PeakBytes == 0 || len(r.AllGPUs()) != 1 || c.starved[r.ID] != "" {
		return
	}
	outranked := false
	for i := range c.gpus {
		g := &c.gpus[i]
		if g.ID != r.GPU {
			continue
		}
		sv := starvation{prio: r.Spec.Priority}
		for _, j := range g.Jobs {
			if j.Priority > r.Spec.Priority {
				sv.by = append(sv.by, j.ID)
			}
		}
		if outranked = len(sv.by) > 0; !outranked {
			// No job there outranks it (now): a report made under the plan
			// in force before its neighbour left, while the device
			// re-plans, or the dispatcher's doing, not a higher priority's.
			break
		}
		if old, ok := c.starving[g.ID]; ok && old.holds(g) && old.prio >= r.Spec.Priority {
			break // known already
		}
		if c.starving == nil {
			c.starving = map[string]starvation{}
		}
		c.starving[g.ID] = sv
	}
	if !outranked || r.Spec.Elastic() {
		return
	}
	pid := c.pids[r.ID]
	if pid == nil {
		return
	}
	types := c.deviceTypes()
	// Types whose demand is not known yet are not candidates now.
	req, demands, _, _ := c.fitRequest(ctx, r, types)
	gpus := withoutOutranking(c.candidates(c.refusedBy(r.ID), demands, len(types)), r.Spec.Priority)
	for i := range gpus {
		if gpus[i].ID == r.GPU {
			gpus[i].Down = true
		}
	}
	dec := placement.Fit(gpus, req)
	if !dec.OK {
		return // nowhere better now: it runs when its neighbour leaves it time
	}
	if c.starved == nil {
		c.starved = map[string]string{}
	}
	c.starved[r.ID] = r.GPU
	c.log.Info("job starved by a higher priority; moving it", "job", r.ID, "from", r.GPU, "room_on", dec.ID)
	ctx.Send(pid, &requeueJob{avoid: r.GPU,
		reason: fmt.Sprintf("starved on %s (a higher-priority job there leaves its kernels no gap); moved to a GPU where no job outranks it", r.GPU)})
}

// deviceOf is the device actor of GPU id, nil when no node the coordinator
// knows has it.
func (c *coordActor) deviceOf(id string) *actor.PID {
	if g := c.fitGPU(id); g != nil {
		return c.devicePID(g)
	}
	return nil
}

// devicePID is the device actor of a GPU.
func (c *coordActor) devicePID(g *placement.FitGPU) *actor.PID {
	var addr string
	if n := c.nodes[g.Node]; n != nil {
		addr = n.info.Address
	}
	var i int
	fmt.Sscanf(strings.TrimPrefix(g.ID, g.Node+"/gpu"), "%d", &i)
	return actor.NewPID(addr, NodeActorName(g.Node)+"/"+DeviceActorName(i))
}

// predicted is a memory-demand prediction (or why there is none), for the
// coordinator actor that asked for it (owner): a coordinator started later
// in the same process takes the stopped one's name.
type predicted struct {
	owner *coordActor
	key   string
	pred  *Prediction
	err   error
}

// demandKey names a prediction: what it depends on (baseKey and the batch).
func demandKey(s *pb.JobSpec, deviceType string) string {
	return fmt.Sprintf("%s|%d", baseKey(s, deviceType), s.Batch)
}

// baseKey is what a prediction depends on but the batch: the elastic
// loop's predictions of one job at several batches share it
// (elastic_ahead.go).
func baseKey(s *pb.JobSpec, deviceType string) string {
	return fmt.Sprintf("%s|%s|%s|%d|%d|%s|%s|%g", s.Model, s.Kind, s.Dtype, s.Seq, s.ParamChunkBytes, s.Optimizer, deviceType, s.Tolerance)
}

// demand returns the job's predicted demand on a device type, or ok=false
// while it is being predicted. Predicting runs TENSILE's MinBudget search
// (up to seconds of CPU), so it runs on its own goroutine, one prediction
// at a time, and the coordinator keeps answering the API meanwhile; the
// result comes back as a predicted message and placement is tried again.
func (c *coordActor) demand(ctx actor.Context, spec *pb.JobSpec, deviceType string) (p *predicted, ok bool) {
	k := demandKey(spec, deviceType)
	if p, seen := c.demands[k]; seen {
		return p, p != nil
	}
	if c.demands == nil {
		c.demands = map[string]*predicted{}
		c.predSem = make(chan struct{}, 1)
	}
	c.demands[k] = nil
	self, sys, pred, sem := ctx.Self(), ctx.ActorSystem(), c.pred, c.predSem
	go func() {
		sem <- struct{}{}
		p, err := pred.Predict(spec, deviceType)
		<-sem
		c.sends.send(sys, self, &predicted{owner: c, key: k, pred: p, err: err})
	}()
	return nil, false
}

// refusedReason says why a job waits when GPUs refused it: which ones and
// why, and why the others do not take it (fitReason).
func refusedReason(refused map[string]refusal, fitReason string) string {
	ids := make([]string, 0, len(refused))
	for g := range refused {
		ids = append(ids, g)
	}
	sort.Strings(ids)
	var b strings.Builder
	for i, g := range ids {
		if i > 0 {
			b.WriteString("; ")
		}
		why := strings.TrimPrefix(refused[g].reason, "device "+g+" refused the budget request: ")
		fmt.Fprintf(&b, "%s refused it (%s)", g, why)
	}
	b.WriteString(", tried again there when a job leaves it")
	if !strings.HasPrefix(fitReason, "no GPU is available") {
		b.WriteString("; other GPUs: " + fitReason)
	}
	return b.String()
}

func (c *coordActor) onMember(ctx actor.Context, ev transport.MemberEvent) {
	if ev.Meta.Role != transport.RoleNode {
		return
	}
	name := ev.Meta.Name
	switch ev.Type {
	case transport.EvJoined:
		if err := checkNodeMeta(ev.Meta); err != nil {
			c.log.Error("node joined with gossip metadata the coordinator cannot use; ignoring it", "node", name, "gossip", ev.Addr, "err", err)
			return
		}
		if ev.Meta.TLS != c.tls {
			c.log.Error("node joined whose actor port runs "+transport.TLSWord(ev.Meta.TLS)+" while the coordinator's runs "+transport.TLSWord(c.tls)+
				"; they cannot reach each other's actors, so its GPUs are ignored: start both with the same --tls-cert, --tls-key and --tls-ca, or neither",
				"node", name, "gossip", ev.Addr)
			return
		}
		prof, err := gpu.LookupProfile(ev.Meta.DeviceType)
		if err != nil {
			c.log.Error("node joined with an unknown device type; ignoring its GPUs", "node", name, "err", err)
			return
		}
		c.removeGPUs(name) // a rejoin replaces the old entry
		c.nodes[name] = &nodeEntry{info: NodeInfo{Name: name, Address: ev.Meta.Address, Gossip: ev.Addr, State: "alive", GPUs: ev.Meta.GPUs, DeviceType: ev.Meta.DeviceType}}
		for i := 0; i < ev.Meta.GPUs; i++ {
			id := GPUName(name, i)
			c.bumpGPU(id)
			c.gpus = append(c.gpus, placement.FitGPU{ID: id, Node: name, DeviceType: prof.Name, Capacity: prof.MemoryBytes, Jobs: c.orphans[id]})
			delete(c.orphans, id)
		}
		sort.Slice(c.gpus, func(a, b int) bool { return c.gpus[a].ID < c.gpus[b].ID })
		b, _ := json.Marshal(c.nodes[name].info)
		_ = c.store.Put("node."+name, b)
		c.publish(transport.Event{Type: transport.EvJoined, Node: name, Address: ev.Meta.Address, GPUs: ev.Meta.GPUs, DeviceType: ev.Meta.DeviceType})
		c.tryPlace(ctx)
	case transport.EvSuspect:
		if n := c.nodes[name]; n != nil {
			n.info.State = "suspect"
		}
		c.setDown(name, true)
		c.publish(transport.Event{Type: transport.EvSuspect, Node: name})
	case transport.EvAlive:
		if n := c.nodes[name]; n != nil {
			if n.info.State == transport.EvSuspect {
				// Followers saw it suspect: tell them it is back.
				c.publish(transport.Event{Type: transport.EvAlive, Node: name})
			}
			n.info.State = "alive"
		}
		c.setDown(name, false)
		c.tryPlace(ctx)
	case transport.EvDead, transport.EvLeft:
		if n := c.nodes[name]; n != nil {
			n.info.State = ev.Type
		}
		_ = c.store.Delete("node." + name)
		c.publish(transport.Event{Type: ev.Type, Node: name})
		lost := c.removeGPUs(name)
		for _, id := range lost {
			if pid := c.pids[id]; pid != nil {
				ctx.Send(pid, &requeueJob{reason: fmt.Sprintf("node %s %s", name, map[string]string{transport.EvDead: "died", transport.EvLeft: "left"}[ev.Type])})
			}
		}
	}
}

// checkNodeMeta checks the fields of a node's gossip metadata the
// coordinator relies on (it comes off the network).
func checkNodeMeta(m transport.Meta) error {
	if m.GPUs < 1 || m.GPUs > MaxNodeGPUs {
		return fmt.Errorf("gpus %d: must be 1..%d", m.GPUs, MaxNodeGPUs)
	}
	if _, _, err := net.SplitHostPort(m.Address); err != nil {
		return fmt.Errorf("addr %q: not the node's actor address (host:port)", m.Address)
	}
	return nil
}

func (c *coordActor) setDown(node string, down bool) {
	for i := range c.gpus {
		if c.gpus[i].Node == node {
			c.gpus[i].Down = down
		}
	}
}

// removeGPUs drops a node's GPUs and returns the jobs placed on them.
func (c *coordActor) removeGPUs(node string) []string {
	var lost []string
	kept := c.gpus[:0]
	for _, g := range c.gpus {
		if g.Node == node {
			for _, j := range g.Jobs {
				if !slices.Contains(lost, j.ID) { // a job with replicas there is lost once
					lost = append(lost, j.ID)
				}
			}
			continue
		}
		kept = append(kept, g)
	}
	c.gpus = kept
	return lost
}
