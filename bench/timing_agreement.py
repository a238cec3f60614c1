"""Does peak's clock agree with an independent one? (issue 26, item 2)

    python3 bench/timing_agreement.py --peak carry/agreement/peak --out bench/results/h200-timing-agreement.json \
        [--kernels gelu-small,naive-4096] [--reps 50] [--budget-s 540]

For each kernel of KERNELS (our own examples' CUDA kernels, 5 us to ~50 ms, memory- and
compute-bound), in this one process on the GPU:

- peak: `peak run CONTEXT --set ... --json` (its median and spread), and `peak tune` on the
  same single configuration (the time a checkpoint would record: the worker's path);
- independent: `peak export` writes the kernel as a plain file and its launches as data;
  nvcc compiles the kernel to a cubin; this script loads it with the CUDA driver API
  (ctypes, in PyTorch's context), allocates the arrays with PyTorch, launches it with
  cuLaunchKernel and times it with torch.cuda.Event. Its method ("aligned"), written here
  without any of peak's code, is the one peak documents (peak_backend::timing): warm-up
  runs; before every run, outside the events, twice the L2 (as PyTorch reports it) written
  with the driver's 32-bit memset, a new value each run; runs queued back to back on a
  stream of its own (non-blocking, as peak's); between the two events nothing but the
  launches, whose arguments are marshalled once before the loop; one synchronisation at
  the end; the median.

  Diagnostics (issue 26, gelu-bf16-1M at 7 us): the same kernel is also timed with one
  thing changed at a time, and with the method this script used before, so the JSON says
  which difference moves a time: "before" (PyTorch's legacy default stream, 256 MiB
  written by a PyTorch fill kernel, the arguments marshalled in Python between the
  events), "default-stream", "args-per-run", "fill-flush" (256 MiB by a PyTorch fill
  kernel instead of the memset), "no-flush" (nothing written: what a warm L2 gives, so a
  flush that evicts nothing shows up as aligned == no-flush), and "aligned-again" (the
  aligned method once more, after the others: the drift between two identical runs).

Writes the JSON after every kernel (a failure is recorded for its kernel and the rest go
on); stops starting kernels once --budget-s seconds have passed. The ratio is
peak_ms / independent_ms; the target is every kernel within 5%.
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

# name, context, --set values, kind. Durations are rough H200 figures with L2 flushed.
KERNELS = [
    ("gelu-bf16-1M", "examples/gelu-bf16-cuda", {"N": 1048576, "BLOCK_X": 256}, "memory-bound, ~5 us"),
    ("softmax-4096x1024", "examples/softmax-cuda", {"rows": 4096, "cols": 1024, "BLOCK_X": 256}, "memory-bound, ~15 us"),
    ("layernorm-8192x768", "examples/layernorm-cuda", {"N": 8192, "C": 768, "BLOCK_X": 128}, "memory-bound (one thread per row), ~50 us"),
    ("gelu-bf16-64M", "examples/gelu-bf16-cuda", {"N": 67108867, "BLOCK_X": 256}, "memory-bound, ~80 us"),
    ("reduction-64M", "examples/reduction-cuda", {"n": 67108864, "chunk": 1024, "BLOCK_X": 256}, "memory-bound, ~90 us"),
    ("transpose-8192", "examples/transpose-cuda", {"rows": 8192, "cols": 8192, "BLOCK_X": 32, "BLOCK_Y": 8}, "memory-bound, ~0.2 ms"),
    ("stencil-8192", "examples/stencil-cuda", {"h": 8192, "w": 8192, "BLOCK_X": 32, "BLOCK_Y": 8}, "memory-bound, ~0.2 ms"),
    ("sgemm-regtiled-2048", "examples/sgemm-cuda-regtiled", {"n": 2048, "BX": 16, "BY": 16, "TX": 8, "TY": 8, "KT": 8}, "compute-bound, ~0.5 ms"),
    ("naive-matmul-2048", "examples/matmul-cuda-f32", {"n": 2048, "BLOCK_X": 16, "BLOCK_Y": 16}, "compute-bound (naive), ~3 ms"),
    ("naive-matmul-4096", "examples/matmul-cuda-f32", {"n": 4096, "BLOCK_X": 16, "BLOCK_Y": 16}, "compute-bound (naive), ~28 ms: the issue's kernel"),
]

TOLERANCE = 0.05
# The "fill-flush" diagnostic (and the method before): Triton's do_bench size.
FILL_FLUSH_BYTES = 256 << 20
WARMUP = 5

# How the independent side times a kernel: on which stream, how L2 is flushed before each
# run, and whether the launch arguments are marshalled before the loop or in every run
# (between the events). "aligned" is the measurement; the others are diagnostics.
METHODS = {
    "aligned": {"stream": "own", "flush": "memset", "args": "prebuilt"},
    "before": {"stream": "default", "flush": "fill", "args": "per-run"},
    "default-stream": {"stream": "default", "flush": "memset", "args": "prebuilt"},
    "args-per-run": {"stream": "own", "flush": "memset", "args": "per-run"},
    "fill-flush": {"stream": "own", "flush": "fill", "args": "prebuilt"},
    "no-flush": {"stream": "own", "flush": "none", "args": "prebuilt"},
    "aligned-again": {"stream": "own", "flush": "memset", "args": "prebuilt"},
}


def memset_flush_bytes(l2_bytes):
    """Twice the L2, at least 16 MiB and at most 1 GiB, in whole 4-byte words."""
    n = min(max(2 * l2_bytes, 16 << 20), 1 << 30)
    return (n + 3) // 4 * 4


def sets(values):
    return [a for k, v in values.items() for a in ("--set", f"{k}={v}")]


def run_json(cmd, timeout):
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def peak_side(peak, context, values, reps, timeout):
    run = run_json([peak, "run", context, *sets(values), "--warmup", "5", "--reps", str(reps), "--json"], timeout)
    tune = run_json([peak, "tune", context, *sets(values), "--budget", "1", "--no-cache", "--json"], timeout)
    best = tune["runs"][0]["best"]
    return {
        "peak_ms": run["median_ms"],
        "peak_spread": run["spread"],
        "peak_flushed_bytes": run.get("flushed_bytes"),
        "peak_tune_ms": best["median_ms"],
        "peak_tune_spread": best.get("spread"),
    }


class Driver:
    """The few CUDA driver calls the harness needs, through ctypes."""

    def __init__(self):
        self.lib = ctypes.CDLL("libcuda.so.1")

    def check(self, status, what):
        if status != 0:
            name = ctypes.c_char_p()
            self.lib.cuGetErrorName(status, ctypes.byref(name))
            raise RuntimeError(f"{what}: {name.value.decode() if name.value else status}")

    def load(self, cubin_path, kernel):
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        data = open(cubin_path, "rb").read()
        self.check(self.lib.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(data)), "cuModuleLoadData")
        self.check(self.lib.cuModuleGetFunction(ctypes.byref(function), module, kernel.encode()), f"cuModuleGetFunction({kernel})")
        return function

    def max_dynamic_shared(self, function, nbytes):
        # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
        self.check(self.lib.cuFuncSetAttribute(function, 8, ctypes.c_int(nbytes)), "cuFuncSetAttribute")

    @staticmethod
    def holders(args):
        """cuLaunchKernel's kernelParams: a pointer to each argument (`args` must outlive it)."""
        return (ctypes.c_void_p * len(args))(*[ctypes.cast(ctypes.pointer(a), ctypes.c_void_p) for a in args])

    def launch(self, function, grid, block, shared, holders, stream):
        self.check(self.lib.cuLaunchKernel(function, *grid, *block, shared, ctypes.c_void_p(stream), holders, None), "cuLaunchKernel")

    def memset_d32(self, pointer, value, count, stream):
        self.check(self.lib.cuMemsetD32Async(ctypes.c_uint64(pointer), ctypes.c_uint32(value & 0xFFFFFFFF), ctypes.c_size_t(count), ctypes.c_void_p(stream)), "cuMemsetD32Async")

    def l2_bytes(self, device=0):
        # CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
        value, handle = ctypes.c_int(), ctypes.c_int()
        self.check(self.lib.cuDeviceGet(ctypes.byref(handle), device), "cuDeviceGet")
        self.check(self.lib.cuDeviceGetAttribute(ctypes.byref(value), 38, handle), "cuDeviceGetAttribute")
        return value.value


def kernel_file(export_dir):
    """The exported kernel's source: the one .cu file that is not the harness (it keeps the
    context's own file name, matmul.cu or sgemm.cu as well as kernel.cu)."""
    sources = sorted(f for f in os.listdir(export_dir) if f.endswith(".cu") and f != "harness.cu")
    if len(sources) != 1:
        raise RuntimeError(f"expected one kernel source in the export, found {sources}")
    return os.path.join(export_dir, sources[0])


def compile_cubin(export_dir):
    cubin = os.path.join(export_dir, "kernel.cubin")
    cmd = ["nvcc", "-O3", "-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", "-cubin", "-o", cubin, kernel_file(export_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"nvcc: {done.stderr.strip()[-2000:]}")
    return cubin


def independent_side(torch, driver, peak, context, values, reps, timeout, methods=("aligned",)):
    """The kernel's time by each method of `methods` (names in METHODS), in that order: for
    the first, independent_ms and independent_spread; every one under "methods"."""
    export_dir = tempfile.mkdtemp(prefix="agreement-")
    export = run_json([peak, "export", context, *sets(values), "--to", export_dir, "--force", "--json"], timeout)
    seq = export["sequence"]
    if seq.get("tensor_maps"):
        raise RuntimeError("the launches pass tensor maps, which this harness does not encode")
    cubin = compile_cubin(export_dir)
    buffers = [make_buffer(torch, b) for b in seq["buffers"]]
    functions = {}
    for step in seq["steps"]:
        if step["kind"] == "launch" and step["kernel"] not in functions:
            functions[step["kernel"]] = driver.load(cubin, step["kernel"])
    for s in seq["setup"]:
        if s["kind"] == "max_dynamic_shared":
            driver.max_dynamic_shared(functions[s["kernel"]], s["bytes"])
    torch.cuda.synchronize()

    l2 = driver.l2_bytes()
    memset_bytes = memset_flush_bytes(l2)
    memset_buffer = torch.empty(memset_bytes, dtype=torch.uint8, device="cuda")
    fill_buffer = torch.empty(FILL_FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    prebuilt = run_plan(torch, seq, buffers, functions, driver)

    def run_per_run(handle):
        """The method before: every argument marshalled in Python, in every run."""
        for step in seq["steps"]:
            if step["kind"] == "launch":
                args = [kernel_arg(a, buffers) for a in step["args"]]
                driver.launch(functions[step["kernel"]], step["grid"], step["block"], step["shared_bytes"], Driver.holders(args), handle)
            elif step["kind"] == "fill":
                pattern = torch.tensor(step["pattern"], dtype=torch.uint8, device="cuda")
                buffers[step["buffer"]].view(-1, len(step["pattern"]))[:] = pattern
            elif step["kind"] == "copy":
                buffers[step["dst"]][: step["bytes"]].copy_(buffers[step["src"]][: step["bytes"]])

    def measure(method):
        stream = torch.cuda.Stream() if method["stream"] == "own" else torch.cuda.default_stream()
        handle = stream.cuda_stream
        run = (lambda: prebuilt(handle)) if method["args"] == "prebuilt" else (lambda: run_per_run(handle))

        def flush(i):
            if method["flush"] == "memset":
                driver.memset_d32(memset_buffer.data_ptr(), i + 1, memset_bytes // 4, handle)
            elif method["flush"] == "fill":
                fill_buffer.fill_(i & 0xFF)

        torch.cuda.synchronize()
        with torch.cuda.stream(stream):
            for i in range(WARMUP):
                flush(i)
                run()
            events = []
            for i in range(reps):
                flush(WARMUP + i)
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record(stream)
                run()
                end.record(stream)
                events.append((start, end))
        torch.cuda.synchronize()
        times = sorted(s.elapsed_time(e) for s, e in events)
        return {**method, "median_ms": statistics.median(times), "spread": spread(times)}

    results = {name: measure(METHODS[name]) for name in methods}
    first = results[methods[0]]
    return {
        "independent_ms": first["median_ms"],
        "independent_spread": first["spread"],
        "independent_l2_bytes": l2,
        "independent_flushed_bytes": memset_bytes,
        "methods": results,
        "export_build": export["build"],
    }


def spread(sorted_times):
    q = statistics.quantiles(sorted_times, n=4, method="inclusive") if len(sorted_times) > 1 else [sorted_times[0]] * 3
    return {"count": len(sorted_times), "min_ms": sorted_times[0], "q1_ms": q[0], "median_ms": q[1], "q3_ms": q[2], "max_ms": sorted_times[-1]}


def run_plan(torch, seq, buffers, functions, driver):
    """One run of the export's steps with everything but the issue done now: each launch's
    arguments marshalled into a ctypes array once (kept alive by the closure), each fill's
    pattern on the device. Returns run(stream_handle)."""
    issued = []
    for step in seq["steps"]:
        if step["kind"] == "launch":
            args = [kernel_arg(a, buffers) for a in step["args"]]
            issued.append(("launch", functions[step["kernel"]], tuple(step["grid"]), tuple(step["block"]), step["shared_bytes"], args, Driver.holders(args)))
        elif step["kind"] == "fill":
            pattern = torch.tensor(step["pattern"], dtype=torch.uint8, device="cuda")
            issued.append(("fill", buffers[step["buffer"]].view(-1, len(step["pattern"])), pattern))
        elif step["kind"] == "copy":
            issued.append(("copy", buffers[step["dst"]][: step["bytes"]], buffers[step["src"]][: step["bytes"]]))

    def run(handle):
        for item in issued:
            if item[0] == "launch":
                _, function, grid, block, shared, _args, holders = item
                driver.launch(function, grid, block, shared, holders, handle)
            elif item[0] == "fill":
                item[1][:] = item[2]
            else:
                item[1].copy_(item[2])

    return run


def make_buffer(torch, spec):
    dtypes = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64}
    raw = torch.zeros(spec["bytes"], dtype=torch.uint8, device="cuda")
    if spec["role"] != "output" and spec["dtype"] in dtypes:
        typed = raw.view(dtypes[spec["dtype"]])
        typed.copy_(torch.randn(typed.numel(), device="cuda").to(typed.dtype))
    return raw


def kernel_arg(arg, buffers):
    kind = arg["kind"]
    if kind == "buffer":
        return ctypes.c_uint64(buffers[arg["buffer"]].data_ptr())
    return {"i32": ctypes.c_int32, "u32": ctypes.c_uint32, "i64": ctypes.c_int64, "f32": ctypes.c_float}[kind](arg["value"])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--peak", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kernels", default="", help="comma-separated names (default: all)")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--budget-s", type=float, default=540.0, help="start no kernel after this many seconds")
    parser.add_argument("--command", default=" ".join(sys.argv))
    parser.add_argument("--commit", default="unknown")
    parser.add_argument("--device", default="unknown")
    parser.add_argument("--date", default="unknown")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help="comma-separated METHODS names, the first the measurement (default: aligned, then every diagnostic)")
    args = parser.parse_args()
    methods = tuple(m for m in args.methods.split(",") if m)
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        parser.error(f"unknown method(s) {unknown}; known: {', '.join(METHODS)}")

    clock = time.monotonic()
    wanted = [k for k in KERNELS if not args.kernels or k[0] in args.kernels.split(",")]
    report = {
        "benchmark": "timing-agreement",
        "command": args.command,
        "device": args.device,
        "commit": args.commit,
        "date": args.date,
        "tolerance": TOLERANCE,
        "method": {
            "peak": "peak run --warmup 5 --reps N (peak_backend::timing: cache flushed before every run outside the events, runs queued back to back, median); peak_tune_ms: peak tune on the one configuration (the worker's path, 7 runs)",
            "independent": f"peak export's kernel file compiled with nvcc -cubin, launched with cuLaunchKernel through ctypes on a non-blocking stream of PyTorch's, its arguments marshalled once before the loop; twice the L2 written with cuMemsetD32Async (a new value each run) before every run outside the torch.cuda.Event pairs; {WARMUP} warm-up runs, N runs queued back to back, median (method '{methods[0]}')",
            "methods": {name: METHODS[name] for name in methods},
            "diagnostics": "each kernel's methods: the same kernel timed with one thing changed (stream: own non-blocking or PyTorch's legacy default stream; flush: memset of twice the L2, a 256 MiB PyTorch fill kernel, or none; args: marshalled once or in every run between the events); 'before' is the method up to this change; ratio = peak_ms / that method's median",
        },
        "kernels": [],
    }
    try:
        import torch

        torch.cuda.init()
        torch.empty(1, device="cuda")  # makes PyTorch's primary context current
        driver = Driver()
    except Exception as e:  # noqa: BLE001: the reason is the record
        torch = driver = None
        report["setup_error"] = f"{type(e).__name__}: {e}"

    for name, context, values, kind in wanted:
        row = {"name": name, "context": context, "set": values, "kind": kind}
        left = args.budget_s - (time.monotonic() - clock)
        if left <= 0:
            row["error"] = "skipped: the time budget was spent"
        elif driver is None:
            row["error"] = f"skipped: {report['setup_error']}"
        else:
            try:
                row.update(peak_side(args.peak, context, values, args.reps, timeout=max(left, 30)))
                row.update(independent_side(torch, driver, args.peak, context, values, args.reps, timeout=max(left, 30), methods=methods))
                for result in row["methods"].values():
                    result["ratio"] = row["peak_ms"] / result["median_ms"]
                row["ratio"] = row["peak_ms"] / row["independent_ms"]
                row["tune_ratio"] = row["peak_tune_ms"] / row["independent_ms"]
                row["within_tolerance"] = abs(row["ratio"] - 1) <= TOLERANCE
            except Exception as e:  # noqa: BLE001: each kernel's failure is data
                row["error"] = f"{type(e).__name__}: {e}"
        row["elapsed_s"] = round(time.monotonic() - clock, 1)
        report["kernels"].append(row)
        timed = [r for r in report["kernels"] if "ratio" in r]
        report["all_within_tolerance"] = len(timed) == len(wanted) and all(r["within_tolerance"] for r in timed)
        with open(args.out, "w") as f:
            json.dump(report, f, indent=2)
        summary = f"ratio {row['ratio']:.3f} (peak {row['peak_ms']:.4f} ms, tune {row['peak_tune_ms']:.4f} ms, independent {row['independent_ms']:.4f} ms)" if "ratio" in row else row["error"]
        print(f"timing-agreement: {name}: {summary}", file=sys.stderr, flush=True)
        for method, result in row.get("methods", {}).items():
            print(f"timing-agreement:   {method:<15} {result['median_ms'] * 1000:10.2f} us  ratio {result['ratio']:.3f}  iqr {(result['spread']['q3_ms'] - result['spread']['q1_ms']) * 1000:.2f} us", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
