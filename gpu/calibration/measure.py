#!/usr/bin/env python3
"""Measures, on a real NVIDIA GPU, what a gpusched device profile holds.

Runs with PyTorch (torchvision for VGG16, Inception-v3, ResNet-50 and
DenseNet-121; timm for Inception-v4) and writes one JSON file that
`coordinator calibrate --measured FILE` fits a profile to:

  * pinned host<->device copy bandwidth by copy size, both directions at once,
    and while a training iteration runs (TENSILE assumes one copy engine per
    direction that does not slow the compute engine);
  * device-to-device copy bandwidth and large matrix-product rates (fp32, tf32,
    bf16): the ceilings;
  * the cost of a kernel launch, eager and inside a CUDA graph;
  * for each of the five zoo models at batch 16, one training iteration
    (forward, cross-entropy loss, backward, Adam) in fp32 and in tf32: median
    wall time, peak allocated memory, and every kernel's name, count and time.

Each section is written to the output as soon as it is done and a failing
section is recorded and skipped, so one error does not lose the rest.

    python3 gpu/calibration/measure.py --out measured.json [--models vgg16,resnet50]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time
import traceback

import torch

MODELS = ["vgg16", "inception-v3", "inception-v4", "resnet50", "densenet121"]
RESOLUTION = {"inception-v3": 299, "inception-v4": 299}
MIB = 1 << 20


def log(msg):
    print(f"[measure {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def median_event_seconds(fn, reps, warmup=2, stream=None):
    """Median seconds of fn() between CUDA events, over reps runs."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        s = stream or torch.cuda.current_stream()
        start.record(s)
        fn()
        end.record(s)
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times), times


def device_info():
    p = torch.cuda.get_device_properties(0)
    info = {
        "name": torch.cuda.get_device_name(0),
        "total_memory_bytes": p.total_memory,
        "multiprocessors": p.multi_processor_count,
        "capability": f"{p.major}.{p.minor}",
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }
    free, total = torch.cuda.mem_get_info()
    info["free_memory_bytes"] = free
    try:
        q = "name,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,clocks.sm,clocks.max.sm,clocks.mem,power.limit,driver_version,temperature.gpu"
        out = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv"], capture_output=True, text=True, timeout=30)
        info["nvidia_smi"] = out.stdout.strip()
    except Exception as e:  # nvidia-smi is optional
        info["nvidia_smi"] = f"unavailable: {e}"
    return info


def copies():
    res = {"h2d": [], "d2h": []}
    for size in [64 * 1024, MIB, 16 * MIB, 256 * MIB, 1024 * MIB]:
        host = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        host.random_(0, 255)
        dev = torch.empty(size, dtype=torch.uint8, device="cuda")
        reps = 20 if size <= 256 * MIB else 8
        t, _ = median_event_seconds(lambda: dev.copy_(host, non_blocking=True), reps)
        res["h2d"].append({"bytes": size, "seconds": t, "bandwidth": size / t})
        t, _ = median_event_seconds(lambda: host.copy_(dev, non_blocking=True), reps)
        res["d2h"].append({"bytes": size, "seconds": t, "bandwidth": size / t})
        log(f"copy {size // 1024} KiB: h2d {res['h2d'][-1]['bandwidth'] / 1e9:.1f} GB/s, d2h {res['d2h'][-1]['bandwidth'] / 1e9:.1f} GB/s")
        del host, dev
    # Both directions at once, on two streams.
    size = 512 * MIB
    hs = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    hd = torch.empty(size, dtype=torch.uint8, pin_memory=True)
    da = torch.empty(size, dtype=torch.uint8, device="cuda")
    db = torch.empty(size, dtype=torch.uint8, device="cuda")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    walls = []
    for i in range(6):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.cuda.stream(s1):
            da.copy_(hs, non_blocking=True)
        with torch.cuda.stream(s2):
            hd.copy_(db, non_blocking=True)
        torch.cuda.synchronize()
        if i > 0:
            walls.append(time.perf_counter() - t0)
    w = statistics.median(walls)
    res["bidirectional"] = {"bytes_each_way": size, "seconds": w, "bandwidth_each_way": size / w}
    log(f"bidirectional 512 MiB each way: {size / w / 1e9:.1f} GB/s each way")
    return res


def ceilings():
    res = {}
    n = 1 << 30  # 1 GiB of float32 each way
    a = torch.empty(n // 4, dtype=torch.float32, device="cuda").normal_()
    b = torch.empty_like(a)
    t, _ = median_event_seconds(lambda: b.copy_(a), 10)
    res["d2d_bandwidth"] = 2 * n / t
    log(f"device copy: {2 * n / t / 1e12:.2f} TB/s (read + write)")
    del a, b
    res["matmul"] = {}
    for name, dtype, tf32 in [("fp32", torch.float32, False), ("tf32", torch.float32, True), ("bf16", torch.bfloat16, False)]:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        m = 8192
        x = torch.randn(m, m, device="cuda", dtype=dtype)
        y = torch.randn(m, m, device="cuda", dtype=dtype)
        t, _ = median_event_seconds(lambda: torch.mm(x, y), 10, warmup=3)
        res["matmul"][name] = 2 * m ** 3 / t
        log(f"matmul {name} {m}^3: {2 * m ** 3 / t / 1e12:.1f} TFLOP/s")
        del x, y
    torch.backends.cuda.matmul.allow_tf32 = False
    return res


def launches():
    x = torch.zeros(1, device="cuda")
    n = 2000
    for _ in range(100):
        x.add_(1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        x.add_(1)
    torch.cuda.synchronize()
    eager = (time.perf_counter() - t0) / n
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        for _ in range(200):
            x.add_(1)
    t, _ = median_event_seconds(g.replay, 10)
    res = {"eager_seconds_per_launch": eager, "graph_seconds_per_kernel": t / 200}
    log(f"launch: eager {eager * 1e6:.2f} us per kernel, in a graph {t / 200 * 1e6:.2f} us")
    return res


def build(name):
    import torchvision.models as tvm
    if name == "vgg16":
        return tvm.vgg16(weights=None)
    if name == "resnet50":
        return tvm.resnet50(weights=None)
    if name == "densenet121":
        return tvm.densenet121(weights=None)
    if name == "inception-v3":
        return tvm.inception_v3(weights=None, aux_logits=False, init_weights=False)
    if name == "inception-v4":
        import timm
        return timm.create_model("inception_v4", pretrained=False)
    raise ValueError(name)


def kernel_table(prof):
    """[name, count, total seconds] for every device activity (kernels, copies,
    memsets) in the profile, from the raw events; key_averages as a fallback."""
    agg = {}
    try:
        for e in prof.events():
            if not str(getattr(e, "device_type", "")).endswith("CUDA"):
                continue
            us = e.time_range.end - e.time_range.start
            c = agg.setdefault(e.name, [e.name, 0, 0.0])
            c[1] += 1
            c[2] += us / 1e6
    except Exception:
        log(f"raw profiler events unreadable, using key_averages:\n{traceback.format_exc()}")
        agg = {}
    if not agg:
        for e in prof.key_averages():
            us = getattr(e, "self_device_time_total", None)
            if us is None:
                us = getattr(e, "self_cuda_time_total", 0)
            if us and us > 0:
                agg[e.key] = [e.key, int(e.count), us / 1e6]
    rows = list(agg.values())
    rows.sort(key=lambda r: -r[2])
    return rows


def train_model(name, mode, batch, iters, side_copies=False):
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
    torch.backends.cudnn.benchmark = True
    model = build(name).cuda().train()
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    r = RESOLUTION.get(name, 224)
    x = torch.randn(batch, 3, r, r, device="cuda")
    y = torch.randint(0, 1000, (batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = loss_fn(out, y)
        loss.backward()
        opt.step()

    for _ in range(5):  # cudnn.benchmark picks its algorithms here; Adam makes its state
        step()
    torch.cuda.synchronize()
    resident = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    t, times = median_event_seconds(step, iters, warmup=1)
    peak = torch.cuda.max_memory_allocated()
    res = {
        "model": name, "mode": mode, "batch": batch, "params": params,
        "iteration_seconds": t, "iteration_seconds_all": times,
        "resident_bytes": resident, "peak_allocated_bytes": peak,
    }
    log(f"{name} {mode} b{batch}: {t * 1e3:.2f} ms per iteration, peak {peak / 2**30:.2f} GiB, {params} params")
    from torch.profiler import profile, ProfilerActivity
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    kt = kernel_table(prof)
    res["profiled_iterations"] = 3
    res["kernels"] = kt
    busy = sum(k[2] for k in kt) / 3
    res["kernel_seconds_per_iteration"] = busy
    res["kernels_per_iteration"] = sum(k[1] for k in kt) / 3
    log(f"  kernels: {res['kernels_per_iteration']:.0f} per iteration, busy {busy * 1e3:.2f} ms of {t * 1e3:.2f}")
    if side_copies:
        # Copies in both directions on side streams while iterations run:
        # the slowdown of the iteration and the copy bandwidth reached.
        chunk = 64 * MIB
        n = 3
        k = max(8, int(n * t * 60e9 / chunk) + 1)  # enough to outlast the iterations
        hs = torch.empty(chunk, dtype=torch.uint8, pin_memory=True)
        hd = torch.empty(chunk, dtype=torch.uint8, pin_memory=True)
        ds = torch.empty(chunk, dtype=torch.uint8, device="cuda")
        dd = torch.empty(chunk, dtype=torch.uint8, device="cuda")
        s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
        torch.cuda.synchronize()
        e = [torch.cuda.Event(enable_timing=True) for _ in range(6)]
        e[0].record(s1)
        e[2].record(s2)
        with torch.cuda.stream(s1):
            for _ in range(k):
                ds.copy_(hs, non_blocking=True)
        with torch.cuda.stream(s2):
            for _ in range(k):
                hd.copy_(dd, non_blocking=True)
        e[1].record(s1)
        e[3].record(s2)
        cur = torch.cuda.current_stream()
        e[4].record(cur)
        for _ in range(n):
            step()
        e[5].record(cur)
        torch.cuda.synchronize()
        h2d_s = e[0].elapsed_time(e[1]) / 1e3
        d2h_s = e[2].elapsed_time(e[3]) / 1e3
        it_s = e[4].elapsed_time(e[5]) / 1e3 / n
        res["with_copies"] = {
            "iteration_seconds": it_s, "h2d_bandwidth": k * chunk / h2d_s, "d2h_bandwidth": k * chunk / d2h_s,
            "copy_seconds_h2d": h2d_s, "copy_seconds_d2h": d2h_s,
        }
        log(f"  with copies both ways: {it_s * 1e3:.2f} ms per iteration (alone {t * 1e3:.2f}); h2d {k * chunk / h2d_s / 1e9:.1f} GB/s, d2h {k * chunk / d2h_s / 1e9:.1f} GB/s")
    del model, opt, x, y
    torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated zoo models (default: the five)")
    ap.add_argument("--modes", default="fp32,tf32", help="fp32 (no tf32 anywhere) and/or tf32 (cuDNN and matmul tf32)")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("measure.py: no CUDA device is visible to PyTorch; run it on the GPU machine")
    doc = {"schema": 1, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "errors": []}

    def save():
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)

    def section(key, fn):
        try:
            doc[key] = fn()
        except Exception:
            doc["errors"].append({"section": key, "error": traceback.format_exc()})
            log(f"{key} failed:\n{traceback.format_exc()}")
        save()

    section("device", device_info)
    log(f"device: {doc.get('device', {}).get('name')}")
    section("copies", copies)
    section("ceilings", ceilings)
    section("launch", launches)
    doc["models"] = []
    for mode in args.modes.split(","):
        for name in args.models.split(","):
            try:
                doc["models"].append(train_model(name, mode, args.batch, args.iters, side_copies=(mode == "fp32" and name == "resnet50")))
            except Exception:
                doc["errors"].append({"section": f"model {name} {mode}", "error": traceback.format_exc()})
                log(f"{name} {mode} failed:\n{traceback.format_exc()}")
                torch.cuda.empty_cache()
            save()
    log(f"done; {len(doc['errors'])} sections failed; wrote {args.out}")


if __name__ == "__main__":
    main()
