"""Tests of bench/gemm_tile_cost.py's fit (no GPU): a line through times that grow with K,
the fixed cost per round of the 16-bit line's tiles, and the refusals."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm_tile_cost  # noqa: E402


class Fit(unittest.TestCase):
    def test_a_line_is_found_again(self):
        ks = [768, 1536, 3072, 6144]
        fixed, per_k = gemm_tile_cost.fit_line(ks, [22.5 + 0.01 * k for k in ks])
        self.assertAlmostEqual(fixed, 22.5)
        self.assertAlmostEqual(per_k, 0.01)

    def test_a_side_in_microseconds_per_64_of_k_and_per_round(self):
        ks = [768, 3072]
        # 6 rounds of tiles, each 3.75 us fixed and 0.645 us per 64-deep k-step.
        times_ms = [6 * (3.75 + 0.645 * k / 64) / 1000 for k in ks]
        fit = gemm_tile_cost.side_fit(ks, times_ms, 6)
        self.assertAlmostEqual(fit["fixed_us"], 22.5, places=2)
        self.assertAlmostEqual(fit["per_64_k_us"], 3.87, places=3)
        self.assertAlmostEqual(fit["fixed_per_round_us"], 3.75, places=2)

    def test_rounds_of_the_16_bit_tile(self):
        params = {"FRAG_M": "2", "WG_M": "2", "WGMMA_N": "128"}
        self.assertEqual(gemm_tile_cost.rounds_of(8192, 3072, params, 132), 6)     # 768 tiles
        self.assertEqual(gemm_tile_cost.rounds_of(8192, 2304, params, 132), 5)     # 576 tiles
        self.assertIsNone(gemm_tile_cost.rounds_of(8192, 3072, {"TRD_X": "8"}, 132))

    def test_one_k_is_no_line(self):
        with self.assertRaises(ValueError):
            gemm_tile_cost.fit_line([768, 768], [1.0, 1.1])


if __name__ == "__main__":
    unittest.main()
