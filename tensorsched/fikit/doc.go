// Package fikit is kernel-level priority scheduling for one GPU, after FIKIT
// (arXiv 2311.10359): kernels are identified by a stable hash, their
// durations and the idle gaps that follow a high-priority job's kernels are
// measured, and a per-GPU dispatcher launches high-priority kernels at once
// while filling the high-priority job's idle time with low-priority kernels
// that are predicted to fit.
//
// Everything here is pure and deterministic. The dispatcher's decision
// (Dispatcher.Decide) is a function of the waiting kernels and the state of
// the highest-priority active job, so the device actor can call it at run
// time and the simulator (Simulate) can call it in virtual time.
//
// # Simulation model
//
// Simulate runs several jobs on one GPU in virtual time. The GPU has a single
// compute engine: kernels of different jobs never overlap in time in any
// mode. Each job is one host thread with one stream:
//
//   - An inference job serves requests. Request r arrives at Arrivals[r]
//     (a list, or seeded Poisson arrivals at Rate; with neither, requests
//     are back to back, a closed loop: request r arrives when r−1 is done)
//     and is served first-come first-served: it starts at
//     max(arrival, previous request done), spends HostPre on the host
//     (decoding, tokenising), then launches one forward pass of the graph,
//     and after its last kernel spends HostPost on the host; its latency is
//     done − arrival.
//   - A training job runs Iterations iterations; each starts when the last
//     one's kernels have finished, spends HostPerIteration on the host (data
//     loading), then launches the graph's kernels.
//   - Launches are asynchronous, as in CUDA: the host issues kernel k+1
//     HostPerKernel after kernel k, whatever the GPU is doing, and a kernel
//     is ready once it has been issued and its predecessor in the stream has
//     finished (and, with Options.ReadyAt, once its tensors are resident).
//     A job's idle gaps on the GPU are therefore host time it could not hide:
//     pre/post-processing, data loading, waiting for requests, launch-bound
//     stretches of small kernels.
//
// Kernel durations come from the device cost model (gpu.Profile.OpSeconds)
// times a fixed per-kernel-id factor (Options.ModelError: how far the cost
// model is from the device) times per-launch jitter (Options.Jitter); host
// times get Options.HostJitter. The random factors are hashed from the seed
// and (job, unit, op), so every mode sees exactly the same durations and a
// run is reproducible from its seed.
//
// # Modes
//
//   - Share: default GPU time-slicing. The GPU serves one job (context) at a
//     time for up to Options.Slice; when the slice expires and another job
//     has work, the running kernel is preempted and continues in its job's
//     next slice; a job with no ready kernel yields the GPU at once, and the
//     next job with work (round robin) gets a fresh slice.
//   - Streams: every job issues kernels freely and the engine runs ready
//     kernels in the order they became ready, one at a time, without
//     preemption (priority-unaware concurrent streams, serialised).
//   - Exclusive: only jobs at the highest priority among active jobs may
//     launch; lower priorities wait until those jobs complete.
//   - FIKIT: the Dispatcher decides each launch. During a measurement phase
//     (the first Options.MeasureUnits requests or iterations of the
//     highest-priority job) it behaves like Exclusive.
//
// # Gap-fill ratio
//
// The high-priority (HP) jobs are those with the highest priority in the
// run. Their idle time is the time between the first start of an HP kernel
// and the completion of the last HP job (its last request's post-processing
// included) during which no HP kernel runs. The gap-fill ratio is the
// low-priority busy time inside that window divided by that idle time; it
// lies in [0, 1] because the engine runs one kernel at a time.
package fikit
