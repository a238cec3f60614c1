"""Tests of bench/ncu_summary.py on Nsight Compute text shaped like what
bench/h200-gemm-profile.sh writes (no GPU): the launch, the section rows it keeps, the
largest stall ncu names, every per-reason stall metric, largest first, and the summary of
a source page (SASS lines with their counts and stall samples)."""

import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ncu_summary  # noqa: E402

PROFILE = """==PROF== Connected to process 1234
  gemm_nt_bias (1, 132, 1)x(128, 3, 1), Context 1, Stream 13, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    ----------------------- ----------- ------------
    Metric Name             Metric Unit Metric Value
    ----------------------- ----------- ------------
    Duration                         us        68.42
    Compute (SM) Throughput           %        61.35
    ----------------------- ----------- ------------
    Section: Launch Statistics
    Registers Per Thread             register/thread             168
    Grid Size                                                    132
    Section: Warp State Statistics
    Warp Cycles Per Issued Instruction             cycle        11.65
    OPT   On average, each warp of this workload spends 4.8 cycles being stalled waiting for sibling warps at a CTA
          barrier.
    Section: Command line profiler metrics
    ----------------------------------------------------------------------- ----------- ------------
    Metric Name                                                             Metric Unit Metric Value
    ----------------------------------------------------------------------- ----------- ------------
    smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio                             4.80
    smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio                     1,234.50
    smsp__average_warps_issue_stalled_wait_per_issue_active.ratio                                0.61
  nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT (1, 132, 1)x(384, 1, 1), Context 1, Stream 13, Device 0, CC 9.0
    Section: GPU Speed Of Light Throughput
    Duration                         us        58.50
"""


class Launches(unittest.TestCase):
    def parse(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write(text)
        try:
            return ncu_summary.launches(f.name)
        finally:
            os.unlink(f.name)

    def test_each_launch_keeps_its_own_rows(self):
        ours, theirs = self.parse(PROFILE)
        self.assertEqual(ours["kernel"], "gemm_nt_bias")
        self.assertEqual(ours["duration_us"], 68.42)
        self.assertEqual(ours["registers"], 168.0)
        self.assertEqual(ours["warp_cycles_per_issue"], 11.65)
        self.assertEqual(theirs["kernel"], "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_bias_TNT")
        self.assertEqual(theirs["duration_us"], 58.5)
        self.assertNotIn("stalls", theirs)

    def test_the_largest_stall_ncu_names(self):
        ours, _ = self.parse(PROFILE)
        self.assertEqual(ours["top_stall"], {"cycles": 4.8, "reason": "waiting for sibling warps"})

    def test_every_stall_metric_largest_first(self):
        ours, _ = self.parse(PROFILE)
        self.assertEqual(list(ours["stalls"].items()), [("long_scoreboard", 1234.5), ("barrier", 4.8), ("wait", 0.61)])


# A source page as `ncu -i REPORT --page source --csv --print-source sass` writes it: the
# kernel's name, the header, one row per SASS instruction (counts with thousands commas).
SASS = """"Kernel Name","gemm_nt_bias",
"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed","stall_barrier","stall_long_sb","stall_mio","stall_long_sb (Not Issued)"
"0x10","HGMMA.64x128x16.F32.BF16 R24, gdesc[UR24], R24","847","73,728","0","0","131","5"
"0x20","HGMMA.64x128x16.F32.BF16 R88, gdesc[UR28], R88, gsb0","64","73,728","0","0","27","0"
"0x30","@!P1 IMAD.U32 R152, R154, 0x10000, RZ","121","6,144","0","120","1","0"
"0x40","ST.E desc[UR14][R52.64], R187","1","6,144","0","0","0","0"
"0x50","UCGABAR_WAIT","1,871","1,584","1,871","0","0","0"
"""


class SourcePage(unittest.TestCase):
    def summary(self, top=15):
        with tempfile.NamedTemporaryFile("w", suffix="-sass.csv", delete=False) as f:
            f.write(SASS)
        try:
            return ncu_summary.sass_summary(f.name, top)
        finally:
            os.unlink(f.name)

    def test_totals_and_opcodes_count_executions_not_lines(self):
        s = self.summary()
        self.assertEqual(s["kernel"], "gemm_nt_bias")
        self.assertEqual(s["warp_instructions_executed"], 2 * 73728 + 2 * 6144 + 1584)
        self.assertEqual(s["stall_samples"], 847 + 64 + 121 + 1 + 1871)
        # A predicated instruction counts under its opcode, not under its predicate.
        self.assertEqual(s["by_opcode"], {"HGMMA": 147456, "IMAD": 6144, "ST": 6144, "UCGABAR_WAIT": 1584})

    def test_lines_are_grouped_by_how_often_they_ran(self):
        s = self.summary()
        self.assertEqual(s["by_times_a_line_ran"][0], {"times": 73728, "lines": 2, "executed": 147456})
        self.assertEqual(s["by_times_a_line_ran"][1], {"times": 6144, "lines": 2, "executed": 12288})

    def test_the_most_stalled_lines_with_their_largest_reasons(self):
        top = self.summary(top=2)["top_stalled_lines"]
        self.assertEqual([line["sass"] for line in top], ["UCGABAR_WAIT", "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR24], R24"])
        self.assertEqual(top[0]["stalls"], {"barrier": 1871.0})
        # Not-issued columns are not reasons of their own; reasons with no samples are left out.
        self.assertEqual(top[1]["stalls"], {"mio": 131.0})


if __name__ == "__main__":
    unittest.main()
