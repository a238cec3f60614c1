"""Tests of bench/gemm_spread.py's choice of configuration (run by scripts/test.sh, no GPU):
the HEAD's best where the HEAD was tuned at the case's shape, else the configuration the
results file records for that bundle at that shape, else a refusal naming both."""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gemm_spread as gs  # noqa: E402

SHAPE = {"M": 4096, "N": 4096, "K": 4096}


def head(inputs, tuning):
    return {"performance": {"best": {"params": {"inputs": inputs, "tuning": tuning}}}}


def row(bundle, m, n, k, params):
    return {"bundle": bundle, "m": m, "n": n, "k": k, "tuned": {"params": params}}


class ConfigurationFor(unittest.TestCase):
    def test_the_heads_best_where_the_head_was_tuned_at_the_shape(self):
        got = gs.configuration_for("b.bundle", SHAPE, head(SHAPE, {"WG_M": 2}), [row("b.bundle", 4096, 4096, 4096, {"WG_M": 3})])
        self.assertEqual(got, {"WG_M": 2})

    def test_the_rows_configuration_where_the_head_was_tuned_elsewhere(self):
        rows = [row("other.bundle", 4096, 4096, 4096, {"WG_M": 9}), row("b.bundle", 4096, 4096, 4096, {"WG_M": 2, "M": 4096, "N": 4096, "K": 4096})]
        got = gs.configuration_for("b.bundle", SHAPE, head({"M": 8192, "N": 3072, "K": 768}, {"WG_M": 3}), rows)
        self.assertEqual(got, {"WG_M": 2})

    def test_no_row_of_that_bundle_at_that_shape_is_refused_naming_both(self):
        with self.assertRaises(SystemExit) as caught:
            gs.configuration_for("b.bundle", SHAPE, head({"M": 8192, "N": 3072, "K": 768}, {"WG_M": 3}), [row("b.bundle", 8192, 3072, 768, {"WG_M": 3})])
        message = str(caught.exception)
        self.assertIn("b.bundle", message)
        self.assertIn("'M': 8192", message)
        self.assertIn("'M': 4096", message)

    def test_a_square_case_study_kernel_is_timed_at_the_heads_best_at_its_n(self):
        got = gs.configuration_for("sq.bundle", gs.shape_inputs("4096"), head({"n": 4096}, {"STREAM_K": 1}), [])
        self.assertEqual(got, {"STREAM_K": 1})

    def test_a_square_kernel_tuned_at_another_n_is_refused(self):
        with self.assertRaises(SystemExit):
            gs.configuration_for("sq.bundle", gs.shape_inputs("4096"), head({"n": 2048}, {"STREAM_K": 1}), [row("sq.bundle", 4096, 4096, 4096, {})])


class ShapeInputs(unittest.TestCase):
    def test_three_sizes_are_the_roles_and_one_is_the_square_kernels_n(self):
        self.assertEqual(gs.shape_inputs("8192x3072x768"), {"M": 8192, "N": 3072, "K": 768})
        self.assertEqual(gs.shape_inputs("4096"), {"n": 4096})


if __name__ == "__main__":
    unittest.main()
