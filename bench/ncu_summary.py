#!/usr/bin/env python3
"""What a GEMM profile shows, as JSON: reads the Nsight Compute text that
bench/h200-gemm-profile.sh writes (one file per shape and side) and keeps, per profiled
kernel launch, the numbers that explain a "% of cuBLASLt" row: duration, the tensor and
SM throughput, issue activity, occupancy, the launch (grid, block, cluster, registers,
shared memory), the largest warp stall ncu names and, where the profile asked for them,
every stall reason's cycles per issued instruction (`stalls`, largest first).

    python3 bench/ncu_summary.py OUT_JSON COMMAND COMMIT DEVICE DATE profile-*.txt
"""
import json, os, re, sys

# Metric rows of ncu's section tables: "    Name   unit   value" (unit optional).
METRICS = {
    "Duration": "duration_us", "Compute (SM) Throughput": "sm_throughput_pct", "Memory Throughput": "memory_throughput_pct",
    "DRAM Throughput": "dram_throughput_pct", "Issue Slots Busy": "issue_slots_busy_pct", "Executed Ipc Active": "ipc_active",
    "Warp Cycles Per Issued Instruction": "warp_cycles_per_issue", "Achieved Occupancy": "achieved_occupancy_pct",
    "Block Size": "block_size", "Grid Size": "grid_size", "Cluster Size": "cluster_size", "Registers Per Thread": "registers",
    "Dynamic Shared Memory Per Block": "dynamic_smem_kb",
}
LAUNCH = re.compile(r"^  (\S+) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), Context")
ROW = re.compile(r"^    (\S.*?)\s{2,}(?:\S+\s{2,})?([-\d.,]+)\s*$")
TENSOR = re.compile(r"Tensor is the highest-utilized pipeline \(([\d.]+)%\)")
STALL = re.compile(r"each warp of this workload spends ([\d.]+) cycles being stalled (.*?)(?: on| at|\.)")
# The per-reason stall metrics bench/h200-gemm-profile.sh asks for (--metrics regex:...).
STALL_METRIC = re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")


def launches(path):
    """The profiled launches of one ncu text file, in order."""
    found, cur, text = [], None, ""
    for line in open(path, errors="replace"):
        m = LAUNCH.match(line)
        if m:
            cur = {"kernel": m.group(1), "file": os.path.basename(path)}
            found.append(cur)
            text = ""
            continue
        if cur is None:
            continue
        text += line.strip() + " "
        m = ROW.match(line.rstrip("\n"))
        if m and m.group(1).strip() in METRICS and METRICS[m.group(1).strip()] not in cur:
            cur[METRICS[m.group(1).strip()]] = float(m.group(2).replace(",", ""))
        reason = STALL_METRIC.match(m.group(1).strip()) if m else None
        if reason:
            cur.setdefault("stalls", {})[reason.group(1)] = float(m.group(2).replace(",", ""))
        t = TENSOR.search(text)
        if t and "tensor_pipe_pct" not in cur:
            cur["tensor_pipe_pct"] = float(t.group(1))
        s = STALL.search(text)
        if s and "top_stall" not in cur:
            cur["top_stall"] = {"cycles": float(s.group(1)), "reason": " ".join(s.group(2).split())}
    for launch in found:
        if "stalls" in launch:
            launch["stalls"] = dict(sorted(launch["stalls"].items(), key=lambda kv: -kv[1]))
    return found


def main():
    out, command, commit, device, date, *files = sys.argv[1:]
    rows = []
    for path in sorted(files):
        shape = re.search(r"profile-(\d+x\d+x\d+)", path)
        for launch in launches(path):
            launch["shape"] = shape.group(1) if shape else None
            launch["side"] = "cublaslt" if path.endswith("-vendor.txt") else "peak"
            rows.append(launch)
    doc = {"benchmark": "h200-gemm-profile", "command": command, "commit": commit, "device": device, "date": date,
           "method": "Nsight Compute (clocks not locked) on one launch of peak's kernel and of cuBLASLt's, inside one `peak baseline --against cublaslt` process per shape",
           "launches": rows}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {out}: {len(rows)} launches")


if __name__ == "__main__":
    main()
