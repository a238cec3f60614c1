"""Time a context's library equivalent (`[kernel] library` in its peak.toml) with PyTorch.

    python3 bench/library_time.py CONTEXT --set rows=4096 --set cols=1024 [--reps 50]

The expression sees `torch`, every array of the manifest as a 1-D tensor on the GPU (random
normal inputs, fresh for each timed run, as peak's own timing rotates input sets), and the
scalar inputs by name. Prints JSON: the expression, the inputs, the median and every time
in ms (CUDA events around the call alone, after warm-up runs). With --flush-cache, twice the
L2's size is written before each timed call, outside the events, as `peak baseline
--flush-cache` does on its side: a memory-bound kernel is then timed from DRAM.
"""
import argparse
import json
import statistics
import sys
import tomllib

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "f64": torch.float64, "i32": torch.int32}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("context")
    parser.add_argument("--set", action="append", default=[], help="NAME=VALUE for a scalar input")
    parser.add_argument("--reps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--input-sets", type=int, default=4)
    parser.add_argument("--flush-cache", action="store_true", help="evict the L2 before each timed call")
    args = parser.parse_args()

    manifest_path = f"{args.context}/peak.toml"
    with open(manifest_path, "rb") as f:
        manifest = tomllib.load(f)
    expression = manifest["kernel"].get("library")
    if not expression:
        sys.exit(f"{manifest_path}: [kernel] names no `library` expression")
    inputs = {name: int(value) for name, value in (s.split("=", 1) for s in args.set)}
    missing = [name for name in manifest.get("inputs", {}) if name not in inputs]
    if missing:
        sys.exit(f"{manifest_path}: give every scalar input with --set (missing: {', '.join(missing)})")

    # Array sizes are expressions over the inputs (`rows * cols`, `n / chunk`).
    def size(array):
        return int(eval(array["size"].replace("/", "//"), {"__builtins__": {}}, dict(inputs)))

    generator = torch.Generator(device="cuda").manual_seed(1)

    def fresh_arrays():
        arrays = {}
        for array in manifest["arrays"]:
            dtype = DTYPES[array["type"]]
            if array.get("output"):
                arrays[array["name"]] = torch.zeros(size(array), dtype=dtype, device="cuda")
            elif dtype.is_floating_point:
                arrays[array["name"]] = torch.randn(size(array), generator=generator, device="cuda").to(dtype)
            else:
                arrays[array["name"]] = torch.randint(0, 100, (size(array),), generator=generator, device="cuda", dtype=dtype)
        return arrays

    sets = [fresh_arrays() for _ in range(max(args.input_sets, 1))]
    scope = lambda i: {"torch": torch, **inputs, **sets[i % len(sets)]}
    code = compile(expression, manifest_path, "eval")
    for i in range(args.warmup):
        eval(code, scope(i))
    torch.cuda.synchronize()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device="cuda") if args.flush_cache else None
    times = []
    for i in range(args.reps):
        names = scope(i)
        if flush is not None:
            flush.fill_(i & 0xFF)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        eval(code, names)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    json.dump({"context": args.context, "expression": expression, "inputs": inputs, "torch": torch.__version__,
               "device": torch.cuda.get_device_name(), "flush_cache": args.flush_cache, "median_ms": statistics.median(times), "times_ms": times}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
