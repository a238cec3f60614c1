#!/usr/bin/env python3
"""What a GEMM profile shows, as JSON: reads the Nsight Compute text that
bench/h200-gemm-profile.sh writes (one file per shape and side) and keeps, per profiled
kernel launch, the numbers that explain a "% of cuBLASLt" row: duration, the tensor and
SM throughput, issue activity, occupancy, the launch (grid, block, cluster, registers,
shared memory), the largest warp stall ncu names and, where the profile asked for them,
every stall reason's cycles per issued instruction (`stalls`, largest first).

Source pages (`profile-<shape>[-vendor]-sass.csv`: `ncu -i REPORT --page source --csv
--print-source sass`) are summarised per shape and side under `sass`: warp instructions
executed, stall samples, the opcodes that executed most, how many lines ran how often (a
line run once per warp per tile, or per k-step, tells the tile switch from the k-loop), and
the SASS lines where warps stalled most, with their two largest reasons.

    python3 bench/ncu_summary.py OUT_JSON COMMAND COMMIT DEVICE DATE profile-*.txt profile-*-sass.csv
"""
import collections, csv, json, os, re, sys

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
    with open(path, errors="replace") as f:
        content = f.read().splitlines(keepends=True)
    for line in content:
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


def number(text):
    """A cell of ncu's CSV ("1,584", "", "n/a") as a float; 0 where it holds none."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def sass_summary(path, top=15):
    """What one kernel's source page (SASS, one line per instruction) says: see the module doc."""
    with open(path, newline="", errors="replace") as f:
        rows = list(csv.reader(f))
    kernel = rows[0][1] if rows and len(rows[0]) > 1 else None
    header, lines = rows[1], rows[2:]
    col = {name: i for i, name in enumerate(header)}
    executed, samples = col["Instructions Executed"], col["Warp Stall Sampling (All Samples)"]
    reasons = [name for name in header if name.startswith("stall_") and "Not Issued" not in name]
    by_opcode, by_count, lines_per_count = collections.Counter(), collections.Counter(), collections.Counter()
    for line in lines:
        words = line[col["Source"]].split()
        opcode = words[1] if words and words[0].startswith("@") and len(words) > 1 else (words[0] if words else "")
        ran = number(line[executed])
        by_opcode[opcode.split(".")[0]] += ran
        by_count[ran] += ran
        lines_per_count[ran] += 1
    stalled = sorted(lines, key=lambda line: -number(line[samples]))[:top]
    return {
        "kernel": kernel,
        "warp_instructions_executed": int(sum(by_count.values())),
        "stall_samples": int(sum(number(line[samples]) for line in lines)),
        "by_opcode": {op: int(n) for op, n in by_opcode.most_common(20)},
        "by_times_a_line_ran": [{"times": int(times), "lines": lines_per_count[times], "executed": int(total)} for times, total in by_count.most_common(8)],
        "top_stalled_lines": [
            {"sass": line[col["Source"]].strip(), "samples": number(line[samples]), "executed": number(line[executed]),
             "stalls": {name[len("stall_"):]: number(line[col[name]]) for name in sorted(reasons, key=lambda n: -number(line[col[n]]))[:2] if number(line[col[name]]) > 0}}
            for line in stalled
        ],
    }


def main():
    out, command, commit, device, date, *files = sys.argv[1:]
    rows, sass = [], {}
    for path in sorted(files):
        shape = re.search(r"profile-(\d+x\d+x\d+)", path)
        if path.endswith("-sass.csv"):
            side = "cublaslt" if path.endswith("-vendor-sass.csv") else "peak"
            sass.setdefault(shape.group(1) if shape else "?", {})[side] = sass_summary(path)
            continue
        for launch in launches(path):
            launch["shape"] = shape.group(1) if shape else None
            launch["side"] = "cublaslt" if path.endswith("-vendor.txt") else "peak"
            rows.append(launch)
    doc = {"benchmark": "h200-gemm-profile", "command": command, "commit": commit, "device": device, "date": date,
           "method": "Nsight Compute (clocks not locked) on one launch of peak's kernel and of cuBLASLt's, inside one `peak baseline --against cublaslt` process per shape",
           "launches": rows}
    if sass:
        doc["sass"] = sass
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {out}: {len(rows)} launches")


if __name__ == "__main__":
    main()
