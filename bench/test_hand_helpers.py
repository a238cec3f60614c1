"""Tests of the hand experiments' shared helpers (bench/hand/against_cublaslt.py and
source_edit.py; run by scripts/test.sh, no GPU): a baseline's JSON becomes a labelled row and
a failed call a row with its error; replacements that do not find their text exactly are
refused naming the file; a tuning parameter lands before the section named, once."""

import json
import os
import stat
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "hand"))
import against_cublaslt as ac  # noqa: E402
import source_edit as se  # noqa: E402

REPORT = {"kernel_timing": {"median_ms": 0.062}, "cublas_timing": {"median_ms": 0.061}, "percent_of_cublas": 98.4, "validation": {"passed": True}}


def fake_peak(folder, stdout, stderr="", rc=0):
    """An executable standing in for peak: prints its arguments to args.txt and the canned output."""
    path = os.path.join(folder, "peak")
    with open(path, "w") as f:
        f.write(f"#!/bin/sh\necho \"$@\" > {folder}/args.txt\ncat <<'OUT'\n{stdout}\nOUT\necho '{stderr}' >&2\nexit {rc}\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


class Timed(unittest.TestCase):
    def test_a_report_becomes_a_labelled_row_and_the_configuration_its_sets(self):
        with tempfile.TemporaryDirectory() as d:
            row = ac.timed(fake_peak(d, json.dumps(REPORT)), "ctx", {"M": 8192, "COL_PAIRS": 1}, reps=20, dtype="bf16", round=0)
            self.assertEqual(row, {"dtype": "bf16", "round": 0, "peak_ms": 0.062, "cublaslt_ms": 0.061, "pct": 98.4, "matches": True})
            self.assertEqual(open(os.path.join(d, "args.txt")).read().split(),
                             ["baseline", "ctx", "--against", "cublaslt", "--reps", "20", "--json", "--set", "M=8192", "--set", "COL_PAIRS=1"])

    def test_a_failed_call_is_a_row_with_its_error(self):
        with tempfile.TemporaryDirectory() as d:
            row = ac.timed(fake_peak(d, "", stderr="error: no CUDA device", rc=1), "ctx", {}, dtype="f16")
            self.assertEqual(row["dtype"], "f16")
            self.assertIn("no CUDA device", row["error"])
            self.assertNotIn("pct", row)


class SourceEdit(unittest.TestCase):
    def test_a_replacement_must_find_its_text_exactly_count_times(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "kernel.cu")
            open(path, "w").write("a();\na();\nb();\n")
            k = se.Source(path)
            k.sub("a();", "c();", count=2)
            with self.assertRaises(AssertionError) as caught:
                k.sub("b();\nb();", "d();")
            self.assertIn("kernel.cu", str(caught.exception))
            k.save()
            self.assertEqual(open(path).read(), "c();\nc();\nb();\n")

    def test_a_tuning_parameter_lands_before_the_section_once(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "peak.toml")
            open(path, "w").write("[tuning.A]\nvalues = [1]\n\n[tuning.NUM_STAGES]\nvalues = [4]\n")
            se.add_tuning(path, "COL_PAIRS", [0, 1], before="[tuning.NUM_STAGES]")
            self.assertEqual(open(path).read(), "[tuning.A]\nvalues = [1]\n\n[tuning.COL_PAIRS]\nvalues = [0, 1]\n\n[tuning.NUM_STAGES]\nvalues = [4]\n")
            with self.assertRaises(AssertionError):
                se.add_tuning(path, "COL_PAIRS", [0, 1], before="[tuning.NUM_STAGES]")


if __name__ == "__main__":
    unittest.main()
