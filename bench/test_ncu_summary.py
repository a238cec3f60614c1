"""Tests of bench/ncu_summary.py on Nsight Compute text shaped like what
bench/h200-gemm-profile.sh writes (no GPU): the launch, the section rows it keeps, the
largest stall ncu names, and every per-reason stall metric, largest first."""

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


if __name__ == "__main__":
    unittest.main()
