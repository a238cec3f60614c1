#!/usr/bin/env python3
"""Merge a device call's GEMM rows into bench/results/h200-gemm-shapes.json, keeping at each
(dtype, shape, layout) the fastest checkpoint measured there and the others beside it.

Each row of that file is one same-run ratio (peak's kernel and cuBLASLt timed in one
`peak baseline` call). A later call that measures another step of a line at the same shape
must neither overwrite a faster row nor be lost: the slower of the two goes to the row's
`other_lines` (tip, %, times, commit, date, configuration), as the README table shows it.

    python3 bench/keep_fastest.py RUN.json ...     # the h200-gemm-shapes.json a call returned
    python3 bench/keep_fastest.py --table          # the README table's NT rows
"""
import json, os, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULT = os.path.join(ROOT, "bench/results/h200-gemm-shapes.json")


def key(row):
    return (row["dtype"], row["m"], row["n"], row["k"], row["layout"])


def tip_of(row):
    """The row's measured step, named with the step before it: 'Epilogue-Ring (after Epilogue-Hoist)'."""
    if row.get("tip"):
        return row["tip"]
    steps = [s for s in row.get("line", []) if s != "Retune"]
    if not steps:
        return "?"
    return f"{steps[-1]} (after {steps[-2]})" if len(steps) > 1 else steps[-1]


def summary(row):
    """What other_lines keeps of a row that is not the fastest."""
    return {"tip": tip_of(row), "pct": row.get("pct"), "peak_ms": row.get("peak_ms"), "cublaslt_ms": row.get("cublaslt_ms"),
            "commit": row.get("commit"), "date": row.get("date"), "params": (row.get("tuned") or {}).get("params") or row.get("params")}


def merge(doc, run):
    """Rows of `run` that `doc` does not hold yet (same shape and date), each kept or set aside."""
    # A row (or a row set aside) a call carried back from the results file it was given.
    held = {(key(r), d) for r in doc["rows"] for d in [r.get("date")] + [o.get("date") for o in r.get("other_lines", [])]}
    by_key = {key(r): r for r in doc["rows"]}
    changed = []
    for row in run["rows"]:
        if (key(row), row.get("date")) in held or row.get("pct") is None:
            continue
        row = dict(row, tip=tip_of(row))
        old = by_key.get(key(row))
        if old is None:
            by_key[key(row)] = dict(row, other_lines=[])
        elif row["pct"] > old.get("pct", 0):
            # The row's own tip measured again, faster, replaces it: it is not listed beside itself.
            others = [summary(old)] * (tip_of(old) != row["tip"]) + [o for o in old.get("other_lines", []) if o["tip"] != row["tip"]]
            by_key[key(row)] = dict(row, other_lines=others)
        elif row["tip"] != tip_of(old):
            old["other_lines"] = [o for o in old.get("other_lines", []) if o["tip"] != row["tip"]] + [summary(row)]
        # (else the row's own tip measured again, slower: the row is that tip's fastest and stays alone)
        verdict = "the row" if by_key[key(row)] is not old else "{} the row's {:.1f}%".format(
            "beside" if row["tip"] != tip_of(old) else "not kept, slower than", old["pct"])
        changed.append(f"{row['dtype']} {' x '.join(map(str, key(row)[1:4]))}: {row['tip']} {row['pct']:.1f}% ({verdict})")
    doc["rows"] = list(by_key.values())
    for name, command in run.get("commands", {}).items():
        doc.setdefault("commands", {})[name] = command
    return changed


def table(doc):
    for r in doc["rows"]:
        if r["layout"] != "NT":
            continue
        others = "; ".join(f"{o['tip']}: {o['pct']:.1f}%" for o in sorted(r.get("other_lines", []), key=lambda o: -o["pct"]))
        params = " ".join(f"{k}={v}" for k, v in sorted(((r.get("tuned") or {}).get("params") or {}).items()) if k not in ("M", "N", "K"))
        print(f"| {r['dtype']} | {r['m']} x {r['n']} x {r['k']} | NT | bias | {tip_of(r)} | {r['peak_ms']:.4f} | {r['cublaslt_ms']:.4f} | "
              f"**{r['pct']:.1f}%**{' (' + others + ')' if others else ''} | {params} |")


def main():
    doc = json.load(open(RESULT))
    if sys.argv[1:] == ["--table"]:
        table(doc)
        return
    if not sys.argv[1:]:
        raise SystemExit(__doc__)
    for path in sys.argv[1:]:
        for line in merge(doc, json.load(open(path))):
            print(line)
    with open(RESULT, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
