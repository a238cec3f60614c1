"""Tests of bench/gpu_tests.py (run by scripts/test.sh): which targets count as gated, that
a gated binary which is missing, cannot list its tests or lists none is counted as failed,
that a failed test keeps why and the tail of its output, and that insta finds its snapshots
without cargo, on fake test binaries (shell scripts that answer libtest's --list and --exact)."""

import json
import os
import stat
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_tests  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def write(path, text, executable=False):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text))
    if executable:
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)


def fake_binary(path, tests, list_exit=0):
    """A libtest look-alike: `tests` maps a name to (exit status, what the test prints)."""
    cases = "".join(
        f'  "{name}") echo "{said}"; echo "test {name} ... {"ok" if code == 0 else "FAILED"}"; '
        f'echo "test result: {"ok" if code == 0 else "FAILED"}. {1 if code == 0 else 0} passed; {0 if code == 0 else 1} failed"; exit {code};;\n'
        for name, (code, said) in tests.items()
    )
    listing = "".join(f'echo "{name}: test"; ' for name in tests)
    script = f'#!/bin/sh\nif [ "$1" = "--list" ]; then {listing}exit {list_exit}; fi\ncase "$2" in\n{cases}  *) echo "running 0 tests"; exit 0;;\nesac\n'
    write(path, script, executable=True)


class Targets(unittest.TestCase):
    def test_the_repository_gates_include_the_backend_suites_and_the_dxc_test(self):
        targets = gpu_tests.gated_targets(REPO)
        for t in ["peak-cuda/backend_suite", "peak-hlsl/hlsl", "peak-cuda/nvrtc", "peak-eval/cuda", "peak-cuda/cublaslt", "peak-opencl/backend_suite", "peak-cli/sanitize"]:
            self.assertIn(t, targets)
        # Targets with no gate at all are not carried.
        for t in ["peak-workflow/fsck", "peak-spec/fuzz", "peak-transform/fuzz"]:
            self.assertNotIn(t, targets)

    def test_a_gate_counts_where_it_is_printed_or_called(self):
        with tempfile.TemporaryDirectory() as root:
            write(f"{root}/crates/peak-backend/src/suite.rs", """\
                /// Doc comments may say "SKIPPED" without printing it.
                pub fn plain() {}
                pub fn opened_or_skip() { eprintln!("SKIPPED: no backend"); }
                #[macro_export]
                macro_rules! suite { () => { eprintln!("SKIPPED {}: why", 1); } }
                """)
            write(f"{root}/crates/c/tests/support/mod.rs", 'pub fn helper() {}\npub fn gpu(t: &str) { eprintln!("SKIPPED {t}: none"); }\n')
            write(f"{root}/crates/c/tests/direct.rs", 'fn t() { eprintln!("SKIPPED t: no tool"); }\n')
            write(f"{root}/crates/c/tests/by_support.rs", 'mod support;\nfn t() { let _ = support::gpu("t"); }\n')
            write(f"{root}/crates/c/tests/support_unused.rs", 'mod support;\nfn t() { support::helper(); }\n')
            write(f"{root}/crates/c/tests/by_macro.rs", "peak_backend::suite!();\n")
            write(f"{root}/crates/c/tests/by_function.rs", "fn t() { opened_or_skip(); }\n")
            write(f"{root}/crates/c/tests/comment_only.rs", "// prints SKIPPED? no: \"SKIPPED in a comment\"\nfn t() { plain(); }\n")
            write(f"{root}/crates/c/tests/renamed_file.rs", 'fn t() { eprintln!("SKIPPED t"); }\n')
            write(f"{root}/crates/c/Cargo.toml", '[package]\nname = "c"\n\n[[test]]\nname = "renamed"\npath = "tests/renamed_file.rs"\nharness = false\n')
            self.assertEqual(gpu_tests.gated_targets(root), ["c/by_function", "c/by_macro", "c/by_support", "c/direct", "c/renamed"])


class Run(unittest.TestCase):
    def test_missing_unlistable_and_empty_binaries_count_as_failed(self):
        with tempfile.TemporaryDirectory() as root:
            for name in ["good", "missing", "empty", "unlistable", "failing"]:
                write(f"{root}/crates/c/tests/{name}.rs", f'fn {name}() {{ eprintln!("SKIPPED {name}: no device"); }}\n')
            folder, out = f"{root}/bin", f"{root}/out"
            fake_binary(f"{folder}/c-good", {"runs": (0, "checked"), "skips": (0, "SKIPPED skips: no CUDA device")})
            fake_binary(f"{folder}/c-empty", {})
            fake_binary(f"{folder}/c-unlistable", {"t": (0, "")}, list_exit=101)
            fake_binary(f"{folder}/c-failing", {"breaks": (101, "assertion failed"), "holds": (0, "")})
            write(f"{folder}/commit", "abc1234\n")
            result = gpu_tests.run(folder, out, root, with_profile=False)
            with open(f"{out}/h200-gpu-tests.json") as f:
                written = json.load(f)
            self.assertEqual(written["failed"], result["failed"])
            tests = result["tests"]
            self.assertEqual(tests["c-good"], {"runs": {"outcome": "passed"}, "skips": {"outcome": "skipped", "why": "SKIPPED skips: no CUDA device"}})
            self.assertEqual(tests["c-missing"][gpu_tests.BINARY_LEVEL]["why"], "binary not carried")
            self.assertEqual(tests["c-empty"][gpu_tests.BINARY_LEVEL]["why"], "lists no tests")
            self.assertIn("--list exited 101", tests["c-unlistable"][gpu_tests.BINARY_LEVEL]["why"])
            self.assertEqual(tests["c-failing"]["breaks"]["outcome"], "failed")
            self.assertEqual(tests["c-failing"]["holds"]["outcome"], "passed")
            # missing, empty, unlistable, and the failing test: four failures of six entries.
            self.assertEqual((result["run"], result["passed"], result["failed"], result["skipped"]), (7, 2, 4, 1))
            self.assertEqual(result["commit"], "abc1234")
            self.assertEqual(result["skip_reasons"], ["no CUDA device"])
            self.assertTrue(result["complete"])
            self.assertEqual(list(tests), ["c-empty", "c-failing", "c-good", "c-missing", "c-unlistable"])

    def test_a_test_that_reports_nothing_run_is_failed(self):
        with tempfile.TemporaryDirectory() as root:
            write(f"{root}/crates/c/tests/quiet.rs", 'fn t() { eprintln!("SKIPPED t"); }\n')
            # Lists a test, but running it by name runs nothing (exit 0, "0 passed").
            write(f"{root}/bin/c-quiet", """\
                #!/bin/sh
                if [ "$1" = "--list" ]; then echo "ghost: test"; exit 0; fi
                echo "running 0 tests"; echo "test result: ok. 0 passed; 0 failed"; exit 0
                """, executable=True)
            result = gpu_tests.run(f"{root}/bin", f"{root}/out", root, with_profile=False)
            self.assertEqual(result["tests"]["c-quiet"]["ghost"]["outcome"], "failed")
            self.assertEqual(result["failed"], 1)


class FailureText(unittest.TestCase):
    def test_a_failed_test_keeps_why_and_the_tail_of_its_output_in_order(self):
        with tempfile.TemporaryDirectory() as root:
            write(f"{root}/crates/c/tests/snap.rs", 'fn t() { eprintln!("SKIPPED t"); }\n')
            # 100 numbered lines, an insta summary on stdout, the panic on stderr, then
            # libtest's summary on stdout again.
            write(f"{root}/bin/c-snap", """\
                #!/bin/sh
                if [ "$1" = "--list" ]; then echo "check: test"; exit 0; fi
                i=1; while [ $i -le 100 ]; do echo "line $i"; i=$((i+1)); done
                echo "Snapshot file: crates/c/tests/snapshots/check.snap"
                echo "-old snapshot"
                echo "+new results"
                echo "thread 'check' (17749) panicked at src/runtime.rs:734:13:" >&2
                echo "snapshot assertion for 'check' failed in line 153" >&2
                echo "test result: FAILED. 0 passed; 1 failed"
                exit 101
                """, executable=True)
            result = gpu_tests.run(f"{root}/bin", f"{root}/out", root, with_profile=False)
            failed = result["tests"]["c-snap"]["check"]
            self.assertEqual(failed["outcome"], "failed")
            self.assertEqual(failed["why"], "panicked at src/runtime.rs:734:13: snapshot assertion for 'check' failed in line 153")
            tail = failed["output_tail"].split("\n")
            self.assertEqual(len(tail), gpu_tests.TAIL_LINES)
            # The last 60 lines as written: lines 47 to 100, the diff, the panic, the summary.
            self.assertEqual(tail[0], "line 47")
            self.assertEqual(tail[-6:], ["Snapshot file: crates/c/tests/snapshots/check.snap", "-old snapshot", "+new results",
                                         "thread 'check' (17749) panicked at src/runtime.rs:734:13:", "snapshot assertion for 'check' failed in line 153",
                                         "test result: FAILED. 0 passed; 1 failed"])
            with open(f"{root}/out/h200-gpu-tests.json") as f:
                self.assertEqual(json.load(f)["tests"]["c-snap"]["check"]["output_tail"], failed["output_tail"])

    def test_passed_and_skipped_tests_keep_no_output(self):
        with tempfile.TemporaryDirectory() as root:
            write(f"{root}/crates/c/tests/ok.rs", 'fn t() { eprintln!("SKIPPED t"); }\n')
            fake_binary(f"{root}/bin/c-ok", {"runs": (0, "checked"), "skips": (0, "SKIPPED skips: no CUDA device")})
            result = gpu_tests.run(f"{root}/bin", f"{root}/out", root, with_profile=False)
            for entry in result["tests"]["c-ok"].values():
                self.assertNotIn("output_tail", entry)

    def test_a_tail_is_cut_to_its_characters(self):
        tail = gpu_tests.output_tail("\n".join("x" * 1000 for _ in range(100)))
        self.assertEqual(len(tail), gpu_tests.TAIL_CHARS)
        self.assertEqual(gpu_tests.output_tail("a\nb\n", lines=1), "b")

    def test_a_time_out_is_the_reason(self):
        with tempfile.TemporaryDirectory() as root:
            write(f"{root}/crates/c/tests/slow.rs", 'fn t() { eprintln!("SKIPPED t"); }\n')
            write(f"{root}/bin/c-slow", """\
                #!/bin/sh
                if [ "$1" = "--list" ]; then echo "hangs: test"; exit 0; fi
                echo "started"; exec sleep 30
                """, executable=True)
            results = gpu_tests.run_binary(f"{root}/bin/c-slow", timeout=1, root=root)
            self.assertEqual(results["hangs"]["outcome"], "failed")
            self.assertEqual(results["hangs"]["why"], "timed out after 1 s")


class Insta(unittest.TestCase):
    def test_tests_find_their_snapshots_under_root_without_cargo(self):
        """insta asks `cargo metadata` for the workspace root; with no cargo (the GPU
        machine) it looks under the crate's folder and every snapshot is "new". The runner
        names the root, and asks for no .snap.new files."""
        with tempfile.TemporaryDirectory() as root:
            write(f"{root}/crates/c/tests/snap.rs", 'fn t() { eprintln!("SKIPPED t"); }\n')
            write(f"{root}/bin/c-snap", f"""\
                #!/bin/sh
                if [ "$1" = "--list" ]; then echo "snapshot: test"; exit 0; fi
                [ "$INSTA_WORKSPACE_ROOT" = "{os.path.abspath(root)}" ] || {{ echo "INSTA_WORKSPACE_ROOT=$INSTA_WORKSPACE_ROOT"; exit 101; }}
                [ "$INSTA_UPDATE" = "no" ] || {{ echo "INSTA_UPDATE=$INSTA_UPDATE"; exit 101; }}
                echo "test result: ok. 1 passed; 0 failed"
                """, executable=True)
            result = gpu_tests.run(f"{root}/bin", f"{root}/out", root, with_profile=False)
            self.assertEqual(result["tests"]["c-snap"]["snapshot"], {"outcome": "passed"})


if __name__ == "__main__":
    unittest.main()
