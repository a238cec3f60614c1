#!/usr/bin/env python3
"""Where a GEMM row's time goes, per side: peak's tip and cuBLASLt timed together at one M x N
and several K (one `peak baseline --against cublaslt` call per K, the same configuration),
and each side's times fitted by least squares to

    time(K) = fixed + per_k * K

`per_k` is the main loop's cost (both sides do the same k-steps); `fixed` is what does not
grow with K: the tile switches (epilogue, drain, restart) and the launch. Where the
configuration names the 16-bit line's tile (FRAG_M, WG_M, WGMMA_N), `fixed` is also given
per round of tiles (rounds = ceil(tiles / SMS), one block per SM). A row short of cuBLASLt
with the same per_k has its gap in `fixed`; with a larger per_k, in the main loop.

There (the GPU machine, a carried peak):
    OUT=folder WF=path/to/replayed.bundle M=8192 N=3072 KS="768 1536 3072 6144" \\
      PARAMS="BLOCK_X=128 ..." python3 bench/gemm_tile_cost.py
Writes OUT/h200-gemm-tile-cost.json (command, device, commit, date, the times and fits).
"""
import datetime, json, math, os, subprocess, sys, tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gemm_shapes import baseline  # noqa: E402


def fit_line(xs, ys):
    """Least-squares intercept and slope of ys against xs (two points at least)."""
    if len(xs) < 2 or len(set(xs)) < 2:
        raise ValueError("a line needs two different K at least")
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - slope * mx, slope


def rounds_of(m, n, params, sms):
    """Rounds of tiles of the 16-bit line's persistent kernel, or None for another tile."""
    if not all(p in params for p in ("FRAG_M", "WG_M", "WGMMA_N")):
        return None
    tile_m = 64 * int(params["FRAG_M"]) * int(params["WG_M"])
    tiles = math.ceil(m / tile_m) * math.ceil(n / int(params["WGMMA_N"]))
    return math.ceil(tiles / sms)


def side_fit(ks, times_ms, rounds):
    fixed, per_k = fit_line(ks, [t * 1000 for t in times_ms])
    fit = {"fixed_us": round(fixed, 3), "per_64_k_us": round(per_k * 64, 4)}
    if rounds:
        fit["fixed_per_round_us"] = round(fixed / rounds, 3)
    return fit


def main():
    out, wf = os.environ.get("OUT", "."), os.environ["WF"]
    m, n = int(os.environ["M"]), int(os.environ["N"])
    ks = [int(k) for k in os.environ.get("KS", "768 1536 3072 6144").split()]
    params = dict(p.split("=", 1) for p in os.environ.get("PARAMS", "").split())
    peak, reps, sms = os.environ.get("PEAK", "carry/gemm-shapes/peak"), int(os.environ.get("REPS", "20")), int(os.environ.get("SMS", "132"))
    if os.path.isfile(wf):
        folder = tempfile.mkdtemp()
        subprocess.run(["git", "clone", "-q", wf, folder + "/wf"], check=True)
        wf = folder + "/wf"
    runs = [dict(baseline(peak, os.path.join(wf, "context"), {"M": m, "N": n, "K": k}, params, reps), K=k) for k in ks]
    failed = [r for r in runs if "error" in r]
    if failed:
        raise SystemExit(f"gemm_tile_cost: peak baseline failed at K = {[r['K'] for r in failed]}: {failed[0]['error'][-500:]}")
    rounds = rounds_of(m, n, params, sms)
    doc = {"benchmark": "h200-gemm-tile-cost", "command": f"M={m} N={n} KS=\"{' '.join(map(str, ks))}\" PARAMS=\"{os.environ.get('PARAMS', '')}\" python3 bench/gemm_tile_cost.py (WF={os.environ['WF']})",
           "device": runs[0].get("device"), "commit": os.environ.get("PEAK_COMMIT", "unknown"),
           "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "method": "peak baseline --against cublaslt per K (CUDA events, L2 flushed, medians), both sides in each call; least-squares time = fixed + per_k * K per side",
           "m": m, "n": n, "params": params, "rounds": rounds,
           "runs": [{"K": r["K"], "peak_ms": r["peak_ms"], "cublaslt_ms": r["cublaslt_ms"], "pct": r["pct"], "matches_cublaslt": r["matches_cublaslt"]} for r in runs],
           "fit": {"peak": side_fit(ks, [r["peak_ms"] for r in runs], rounds), "cublaslt": side_fit(ks, [r["cublaslt_ms"] for r in runs], rounds)}}
    with open(os.path.join(out, "h200-gemm-tile-cost.json"), "w") as f:
        json.dump(doc, f, indent=1)
    print(json.dumps(doc["fit"]))


if __name__ == "__main__":
    main()
