"""Tests of bench/keep_fastest.py (run by scripts/test.sh, no GPU), on small synthetic
results documents, never the real bench/results/h200-gemm-shapes.json: merge keeps at each
(dtype, m, n, k, layout) the fastest row and sets the slower measurements aside in the row's
other_lines (tip, %, times, commit, date, configuration), one entry per tip; rows a call
carries back from the file it was given change nothing; tip_of names the last step that is
not a Retune with the step before it."""

import copy
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import keep_fastest as kf  # noqa: E402

BASE = ["init", "Refactor", "WGMMA", "Persistent-Tiles", "Consumer-Overlap"]
HOIST = BASE + ["Epilogue-Hoist", "Retune"]
RING = BASE + ["Epilogue-Hoist", "Retune", "Epilogue-Ring", "Retune"]
SPLIT_K = BASE + ["Ping-Pong", "Persistent-Split-K"]


def measured(line, pct, date, dtype="bf16", shape=(8192, 3072, 768), layout="NT", commit="abc1234", params=None):
    """A row as a `peak baseline` call returns it: no tip, no other_lines."""
    m, n, k = shape
    cublaslt_ms = 0.06
    return {"dtype": dtype, "m": m, "n": n, "k": k, "layout": layout, "epilogue": "bias", "commit": commit, "date": date,
            "line": list(line), "peak_ms": cublaslt_ms * 100 / pct, "cublaslt_ms": cublaslt_ms, "pct": pct,
            "tuned": {"params": dict(params or {"BLOCK_X": 128, "NUM_STAGES": 4, "M": m, "N": n, "K": k})}}


def doc_of(*rows):
    return {"benchmark": "h200-gemm-shapes", "rows": [copy.deepcopy(r) for r in rows]}


def tips(row):
    return [o["tip"] for o in row["other_lines"]]


class Merge(unittest.TestCase):
    def test_a_faster_row_replaces_the_row_and_the_old_one_is_set_aside(self):
        old = dict(measured(HOIST, 80.5, "2026-11-28T22:35:01+00:00", commit="426f9fe", params={"BLOCK_X": 128, "NUM_STAGES": 5}),
                   tip="Epilogue-Hoist (after Consumer-Overlap)",
                   other_lines=[{"tip": "Persistent-Split-K", "pct": 78.0, "date": "2026-11-28T19:09:49+00:00"}])
        doc = doc_of(old)
        new = measured(RING, 87.9, "2026-11-29T00:32:14+00:00", commit="02c6135")
        changed = kf.merge(doc, {"rows": [new]})

        self.assertEqual(len(doc["rows"]), 1)
        row = doc["rows"][0]
        self.assertEqual((row["pct"], row["date"], row["commit"]), (87.9, new["date"], "02c6135"))
        self.assertEqual(row["tip"], "Epilogue-Ring (after Epilogue-Hoist)")
        # The old row, summarised with its tip and %, first; what it had set aside stays beside it.
        self.assertEqual(row["other_lines"][0], {
            "tip": "Epilogue-Hoist (after Consumer-Overlap)", "pct": 80.5, "peak_ms": old["peak_ms"], "cublaslt_ms": 0.06,
            "commit": "426f9fe", "date": old["date"], "params": {"BLOCK_X": 128, "NUM_STAGES": 5}})
        self.assertEqual(tips(row), ["Epilogue-Hoist (after Consumer-Overlap)", "Persistent-Split-K"])
        self.assertEqual(changed, ["bf16 8192 x 3072 x 768: Epilogue-Ring (after Epilogue-Hoist) 87.9% (the row)"])

    def test_a_slower_row_is_set_aside_and_the_row_stays(self):
        old = dict(measured(RING, 87.9, "2026-11-29T00:32:14+00:00"), tip="Epilogue-Ring (after Epilogue-Hoist)", other_lines=[])
        doc = doc_of(old)
        slower = measured(SPLIT_K, 80.2, "2026-11-29T01:00:00+00:00", commit="74b8698", params={"K_SPLITS": 1})
        changed = kf.merge(doc, {"rows": [slower]})

        self.assertEqual(len(doc["rows"]), 1)
        row = doc["rows"][0]
        self.assertEqual((row["tip"], row["pct"], row["date"]), (old["tip"], 87.9, old["date"]))
        self.assertEqual(row["other_lines"], [{
            "tip": "Persistent-Split-K (after Ping-Pong)", "pct": 80.2, "peak_ms": slower["peak_ms"], "cublaslt_ms": 0.06,
            "commit": "74b8698", "date": slower["date"], "params": {"K_SPLITS": 1}}])
        self.assertEqual(changed, ["bf16 8192 x 3072 x 768: Persistent-Split-K (after Ping-Pong) 80.2% (beside the row's 87.9%)"])

    def test_rows_the_doc_already_holds_change_nothing(self):
        set_aside = measured(SPLIT_K, 91.0, "2026-11-28T19:09:49+00:00")  # faster, but already set aside
        kept = dict(measured(RING, 87.9, "2026-11-29T00:32:14+00:00"), tip="Epilogue-Ring (after Epilogue-Hoist)",
                    other_lines=[kf.summary(set_aside)])
        other_shape = dict(measured(HOIST, 90.4, "2026-11-28T22:35:47+00:00", shape=(8192, 768, 3072)),
                           tip="Epilogue-Hoist (after Consumer-Overlap)", other_lines=[])
        doc = doc_of(kept, other_shape)
        before = copy.deepcopy(doc)
        # The call carries back the file it was given: the rows as they are, and (from an older
        # copy of the file) the row since set aside, as a row of its own; also a row not measured.
        run = {"rows": [copy.deepcopy(kept), copy.deepcopy(other_shape), set_aside,
                        dict(measured(RING, 1.0, "2026-11-29T02:00:00+00:00"), peak_ms=None, pct=None)]}
        self.assertEqual(kf.merge(doc, run), [])
        self.assertEqual(doc, before)

    def test_the_same_tip_measured_again_replaces_its_earlier_entry(self):
        hoist_first = measured(HOIST, 76.1, "2026-11-28T22:35:01+00:00")
        split_k = measured(SPLIT_K, 80.2, "2026-11-28T19:09:49+00:00")
        row = dict(measured(RING, 87.9, "2026-11-29T00:32:14+00:00"), tip="Epilogue-Ring (after Epilogue-Hoist)",
                   other_lines=[kf.summary(split_k), kf.summary(hoist_first)])

        # Slower than the row: the new measurement takes the place of the tip's earlier one.
        doc = doc_of(row)
        hoist_again = measured(HOIST, 79.0, "2026-11-29T03:00:00+00:00", commit="fedcba9")
        kf.merge(doc, {"rows": [hoist_again]})
        (merged,) = doc["rows"]
        self.assertEqual(merged["pct"], 87.9)
        self.assertEqual(sorted(tips(merged)), ["Epilogue-Hoist (after Consumer-Overlap)", "Persistent-Split-K (after Ping-Pong)"])
        hoist = [o for o in merged["other_lines"] if o["tip"].startswith("Epilogue-Hoist")]
        self.assertEqual([(o["pct"], o["date"], o["commit"]) for o in hoist], [(79.0, hoist_again["date"], "fedcba9")])

        # Faster than the row: it becomes the row, and its earlier entry is not kept beside it.
        doc = doc_of(row)
        kf.merge(doc, {"rows": [measured(HOIST, 90.0, "2026-11-29T03:00:00+00:00")]})
        (merged,) = doc["rows"]
        self.assertEqual((merged["tip"], merged["pct"]), ("Epilogue-Hoist (after Consumer-Overlap)", 90.0))
        self.assertEqual(tips(merged), ["Epilogue-Ring (after Epilogue-Hoist)", "Persistent-Split-K (after Ping-Pong)"])

    def test_the_rows_own_tip_measured_again_is_not_listed_beside_itself(self):
        row = dict(measured(RING, 87.9, "2026-11-29T00:32:14+00:00"), tip="Epilogue-Ring (after Epilogue-Hoist)",
                   other_lines=[kf.summary(measured(HOIST, 80.5, "2026-11-28T22:35:01+00:00"))])

        doc = doc_of(row)
        kf.merge(doc, {"rows": [measured(RING, 88.4, "2026-11-29T03:00:00+00:00")]})
        (merged,) = doc["rows"]
        self.assertEqual((merged["pct"], merged["date"]), (88.4, "2026-11-29T03:00:00+00:00"))
        self.assertEqual(tips(merged), ["Epilogue-Hoist (after Consumer-Overlap)"])

        doc = doc_of(row)
        changed = kf.merge(doc, {"rows": [measured(RING, 86.0, "2026-11-29T03:00:00+00:00")]})
        self.assertEqual(doc, doc_of(row))
        self.assertIn("not kept", changed[0])

    def test_each_dtype_shape_and_layout_is_a_row_of_its_own(self):
        doc = doc_of(dict(measured(RING, 87.9, "2026-11-29T00:32:14+00:00"), tip="Epilogue-Ring (after Epilogue-Hoist)", other_lines=[]))
        run = {"rows": [measured(HOIST, 70.0, "2026-11-29T03:00:00+00:00", dtype="f16"),
                        measured(HOIST, 71.0, "2026-11-29T03:00:01+00:00", layout="NN"),
                        measured(HOIST, 72.0, "2026-11-29T03:00:02+00:00", shape=(4096, 4096, 4096))],
               "commands": {"bf16": "bash bench/h200-gemm-shapes.sh run"}}
        kf.merge(doc, run)
        self.assertEqual([(kf.key(r), r["pct"], r["other_lines"]) for r in doc["rows"]], [
            (("bf16", 8192, 3072, 768, "NT"), 87.9, []),
            (("f16", 8192, 3072, 768, "NT"), 70.0, []),
            (("bf16", 8192, 3072, 768, "NN"), 71.0, []),
            (("bf16", 4096, 4096, 4096, "NT"), 72.0, [])])
        self.assertEqual(doc["commands"], {"bf16": "bash bench/h200-gemm-shapes.sh run"})


class TipOf(unittest.TestCase):
    def test_the_last_step_that_is_no_retune_after_the_step_before_it(self):
        self.assertEqual(kf.tip_of({"line": RING}), "Epilogue-Ring (after Epilogue-Hoist)")
        self.assertEqual(kf.tip_of({"line": BASE + ["Epilogue-Hoist", "Epilogue-Ring", "Retune", "Retune"]}),
                         "Epilogue-Ring (after Epilogue-Hoist)")
        self.assertEqual(kf.tip_of({"line": SPLIT_K}), "Persistent-Split-K (after Ping-Pong)")

    def test_a_tip_the_row_names_is_kept(self):
        self.assertEqual(kf.tip_of({"tip": "Persistent-Split-K", "line": SPLIT_K}), "Persistent-Split-K")

    def test_a_line_of_one_step_or_none(self):
        self.assertEqual(kf.tip_of({"line": ["init", "Retune"]}), "init")
        self.assertEqual(kf.tip_of({"line": ["Retune"]}), "?")
        self.assertEqual(kf.tip_of({}), "?")


if __name__ == "__main__":
    unittest.main()
