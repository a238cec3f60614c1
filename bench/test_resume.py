"""Tests of how the GEMM benchmarks pick checkpoints out of a replayed workflow and widen
their retune (run by scripts/test.sh, no GPU): gemm_shapes.resume_from starts a new
workflow from a returned replay without the retunes on top of it, so that `peak replay`
resumes after its last step; compare_step.checkpoints finds a step and its parent on the
first-parent chain; gemm_shapes.neighbourhood takes RETUNE_WIDEN's values and names a
malformed item; gemm_shapes.tip_to_time times nothing after a failed replay."""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_step  # noqa: E402
import gemm_shapes  # noqa: E402


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True, text=True).stdout.strip()


def replayed_bundle(folder, subjects):
    """A bundle of a workflow-shaped repository: one commit per subject on main (its HEAD),
    and the peak-attempts branch every workflow has."""
    repo = os.path.join(folder, "replayed")
    subprocess.run(["git", "init", "-q", "-b", "main", repo], check=True)
    git(repo, "config", "user.email", "t@example.com")
    git(repo, "config", "user.name", "t")
    for i, subject in enumerate(subjects):
        with open(os.path.join(repo, "step.txt"), "w") as f:
            f.write(f"{i}\n")
        git(repo, "add", "step.txt")
        git(repo, "commit", "-q", "-m", subject)
    # The attempts log is a branch of its own, here at the root (a workflow's is a separate history).
    git(repo, "branch", "peak-attempts", git(repo, "rev-list", "--max-parents=0", "HEAD"))
    bundle = os.path.join(folder, "replayed.bundle")
    git(repo, "bundle", "create", bundle, "HEAD", "main", "peak-attempts")
    return bundle


class RetuneWiden(unittest.TestCase):
    """RETUNE_WIDEN widens the fp32 retune's neighbourhood; a malformed item is named."""

    def widened(self, value):
        old = os.environ.get("RETUNE_WIDEN")
        os.environ["RETUNE_WIDEN"] = value
        try:
            return gemm_shapes.neighbourhood(8192, 3072, 768)
        finally:
            if old is None:
                del os.environ["RETUNE_WIDEN"]
            else:
                os.environ["RETUNE_WIDEN"] = old

    def test_values_replace_the_neighbourhoods(self):
        space = self.widened("OFFSET=0,1,2,4,8 TILE_K=8,16,32")
        self.assertEqual((space["OFFSET"], space["TILE_K"]), ("0,1,2,4,8", "8,16,32"))
        self.assertEqual(space["VEC"], gemm_shapes.RETUNE_SPACE["VEC"])

    def test_an_item_without_values_is_named(self):
        with self.assertRaises(SystemExit) as raised:
            self.widened("OFFSET=0,1 TILE_K")
        self.assertIn("'TILE_K' is not NAME=V1,V2", str(raised.exception))


class ResumeFrom(unittest.TestCase):
    def test_drops_the_retunes_on_top_and_keeps_every_step(self):
        with tempfile.TemporaryDirectory() as d:
            bundle = replayed_bundle(d, ["init: kernel", "Refactor: 1 ms", "Ping-Pong: 0.1 ms", "Retune: 0.09 ms", "Retune: 0.08 ms"])
            wf = os.path.join(d, "wf")
            gemm_shapes.resume_from(bundle, wf)
            self.assertEqual(git(wf, "log", "-1", "--format=%s"), "Ping-Pong: 0.1 ms")
            self.assertEqual(git(wf, "rev-list", "--count", "HEAD"), "3")
            self.assertIn("peak-attempts", git(wf, "branch", "--list", "peak-attempts"))
            # No ref of the earlier call's retunes is left for `peak log` to list first.
            self.assertEqual(git(wf, "remote"), "")
            self.assertNotIn("Retune", git(wf, "log", "--all", "--format=%s"))

    def test_an_existing_workflow_is_left_alone(self):
        with tempfile.TemporaryDirectory() as d:
            bundle = replayed_bundle(d, ["init: kernel", "Refactor: 1 ms", "Retune: 0.5 ms"])
            wf = os.path.join(d, "wf")
            os.makedirs(wf)
            gemm_shapes.resume_from(bundle, wf)
            self.assertEqual(os.listdir(wf), [])

    def test_a_file_that_is_no_bundle_is_named(self):
        with tempfile.TemporaryDirectory() as d:
            bogus = os.path.join(d, "notes.txt")
            open(bogus, "w").write("not a bundle\n")
            with self.assertRaises(SystemExit) as stop:
                gemm_shapes.resume_from(bogus, os.path.join(d, "wf"))
            self.assertIn("RESUME_FROM=" + bogus, str(stop.exception))


class Checkpoints(unittest.TestCase):
    def test_the_last_checkpoint_of_a_step_and_its_parent(self):
        with tempfile.TemporaryDirectory() as d:
            bundle = replayed_bundle(d, ["init: kernel", "Ping-Pong: 0.1 ms", "Epilogue-Hoist: 0.09 ms", "Retune: 0.08 ms"])
            wf = os.path.join(d, "wf")
            subprocess.run(["git", "clone", "-q", bundle, wf], check=True)
            parent, child = compare_step.checkpoints(wf, "Epilogue-Hoist")
            self.assertEqual(git(wf, "log", "-1", "--format=%s", child), "Epilogue-Hoist: 0.09 ms")
            self.assertEqual(git(wf, "log", "-1", "--format=%s", parent), "Ping-Pong: 0.1 ms")

    def test_a_missing_step_names_the_steps_there_are(self):
        with tempfile.TemporaryDirectory() as d:
            bundle = replayed_bundle(d, ["init: kernel", "Ping-Pong: 0.1 ms"])
            wf = os.path.join(d, "wf")
            subprocess.run(["git", "clone", "-q", bundle, wf], check=True)
            with self.assertRaises(SystemExit) as stop:
                compare_step.checkpoints(wf, "Epilogue-Ring")
            self.assertIn("'Epilogue-Ring'", str(stop.exception))
            self.assertIn("Ping-Pong, init", str(stop.exception))


if __name__ == "__main__":
    unittest.main()


class TipToTime(unittest.TestCase):
    """A row times the replayed tip only when the replay reproduced the whole line."""

    def setUp(self):
        self.asked = []
        self.real = gemm_shapes.tip_best
        gemm_shapes.tip_best = lambda peak, wf: self.asked.append(wf) or {"TILE_K": 8}

    def tearDown(self):
        gemm_shapes.tip_best = self.real

    def test_a_failed_replay_times_nothing(self):
        self.assertIsNone(gemm_shapes.tip_to_time("peak", "wf", [{"transformation": "Refactor"}], {"rc": 1}))
        self.assertIsNone(gemm_shapes.tip_to_time("peak", "wf", [{"transformation": "Refactor"}], {"rc": "timeout"}))
        self.assertEqual(self.asked, [])

    def test_a_whole_replay_times_its_tip_best(self):
        self.assertEqual(gemm_shapes.tip_to_time("peak", "wf", [{"transformation": "Refactor"}], {"rc": 0}), {"TILE_K": 8})
        self.assertIsNone(gemm_shapes.tip_to_time("peak", "wf", [], {"rc": 0}))
        self.assertEqual(self.asked, ["wf"])
