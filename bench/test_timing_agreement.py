"""Tests of bench/timing_agreement.py's independent side (run by scripts/test.sh), on a fake
PyTorch and a fake driver that record what is issued, in order, on which stream: no GPU,
and no time is measured. They check the method, not a number: before every timed run the
flush is issued outside the events; between the start and the end event nothing but the
launches; the arguments marshalled once where the method says so; the stream each method
names (its own, or the legacy default stream, handle 0)."""

import contextlib
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing_agreement as ta  # noqa: E402

GELU_EXPORT = {
    "build": "nvcc ...",
    "sequence": {
        "buffers": [
            {"name": "out", "dtype": "bf16", "count": 1048576, "bytes": 2097152, "role": "output"},
            {"name": "inp", "dtype": "bf16", "count": 1048576, "bytes": 2097152, "role": "input"},
        ],
        "setup": [],
        "steps": [{"kind": "launch", "kernel": "gelu", "grid": [4096, 1, 1], "block": [256, 1, 1], "shared_bytes": 0,
                   "args": [{"kind": "buffer", "buffer": 0}, {"kind": "buffer", "buffer": 1}, {"kind": "i32", "value": 1048576}]}],
    },
}


class FakeTorch:
    """Just enough of torch for independent_side; every device operation is appended to
    `trace` as (what, stream handle)."""

    float32 = float16 = bfloat16 = float64 = uint8 = "dtype"

    def __init__(self):
        self.trace = []
        self.current = 0
        self.next_stream = 100
        self.next_ptr = 1 << 20
        torch = self

        class Tensor:
            dtype = "dtype"

            def __init__(self, nbytes=0):
                self.ptr = torch.next_ptr
                torch.next_ptr += max(nbytes, 1)

            def view(self, *a):
                return self

            def to(self, *a):
                return self

            def numel(self):
                return 1

            def data_ptr(self):
                return self.ptr

            def copy_(self, other):
                torch.trace.append(("copy", torch.current))

            def fill_(self, value):
                torch.trace.append(("fill", torch.current))

            def __getitem__(self, key):
                return self

            def __setitem__(self, key, value):
                torch.trace.append(("set", torch.current))

        class Stream:
            def __init__(self, handle=None):
                if handle is None:
                    handle, torch.next_stream = torch.next_stream, torch.next_stream + 1
                self.cuda_stream = handle

        class Event:
            def __init__(self, enable_timing=False):
                assert enable_timing

            def record(self, stream=None):
                torch.trace.append(("event", (stream.cuda_stream if stream else torch.current)))

            def elapsed_time(self, other):
                return 0.007

        class Cuda:
            @staticmethod
            def synchronize():
                torch.trace.append(("sync", None))

            @staticmethod
            def default_stream():
                return Stream(0)

            @staticmethod
            @contextlib.contextmanager
            def stream(s):
                before, torch.current = torch.current, s.cuda_stream
                try:
                    yield
                finally:
                    torch.current = before

        Cuda.Stream, Cuda.Event = Stream, Event
        self.cuda = Cuda
        self.Tensor = Tensor

    def zeros(self, n, dtype=None, device=None):
        return self.Tensor(n)

    def empty(self, n, dtype=None, device=None):
        return self.Tensor(n)

    def randn(self, n, device=None):
        return self.Tensor(n)

    def tensor(self, values, dtype=None, device=None):
        return self.Tensor(len(values))


class FakeDriver:
    def __init__(self, torch):
        self.torch = torch
        self.memsets = []

    def load(self, cubin, kernel):
        return kernel

    def max_dynamic_shared(self, function, nbytes):
        pass

    def launch(self, function, grid, block, shared, holders, stream):
        self.torch.trace.append(("launch", stream))

    def memset_d32(self, pointer, value, count, stream):
        self.memsets.append((value, count))
        self.torch.trace.append(("memset", stream))

    def l2_bytes(self, device=0):
        return 60 << 20


class IndependentSide(unittest.TestCase):
    def setUp(self):
        self.saved = (ta.run_json, ta.compile_cubin, ta.kernel_arg)
        self.scratch = tempfile.TemporaryDirectory()
        self.mkdtemp = ta.tempfile.mkdtemp
        ta.tempfile.mkdtemp = lambda prefix="": self.scratch.name
        self.marshalled = 0
        original = ta.kernel_arg

        def counting(arg, buffers):
            self.marshalled += 1
            return original(arg, buffers)

        ta.run_json = lambda cmd, timeout: GELU_EXPORT
        ta.compile_cubin = lambda export_dir: "kernel.cubin"
        ta.kernel_arg = counting

    def tearDown(self):
        ta.run_json, ta.compile_cubin, ta.kernel_arg = self.saved
        ta.tempfile.mkdtemp = self.mkdtemp
        self.scratch.cleanup()

    def timed(self, method, reps=4):
        torch = FakeTorch()
        driver = FakeDriver(torch)
        result = ta.independent_side(torch, driver, "peak", "ctx", {}, reps, timeout=10, methods=(method,))
        # The last measure's trace: from its first synchronisation on.
        trace = torch.trace
        return result, trace, driver

    def runs(self, trace):
        """The issued operations between synchronisations, without them."""
        return [op for op in trace if op[0] != "sync"]

    def test_aligned_flushes_outside_the_events_and_times_only_the_launch_on_its_own_stream(self):
        reps = 4
        result, trace, driver = self.timed("aligned", reps)
        ops = self.runs(trace)
        stream = ops[-1][1]
        self.assertNotEqual(stream, 0, "a stream of its own, not the legacy default stream")
        warmup = [("memset", stream), ("launch", stream)] * ta.WARMUP
        timed = [("memset", stream), ("event", stream), ("launch", stream), ("event", stream)] * reps
        self.assertEqual(ops[-(len(warmup) + len(timed)):], warmup + timed)
        # Twice the L2, in 32-bit words, a new value each run.
        self.assertEqual({count for _, count in driver.memsets}, {(120 << 20) // 4})
        values = [v for v, _ in driver.memsets]
        self.assertEqual(len(set(values)), len(values))
        # The three arguments marshalled once, before any run.
        self.assertEqual(self.marshalled, 3)
        self.assertEqual(result["independent_flushed_bytes"], 120 << 20)
        self.assertEqual(result["methods"]["aligned"]["median_ms"], result["independent_ms"])

    def test_before_is_the_old_method_on_the_default_stream_with_a_fill_kernel_and_marshalling_per_run(self):
        reps = 3
        _, trace, driver = self.timed("before", reps)
        ops = self.runs(trace)
        timed = [("fill", 0), ("event", 0), ("launch", 0), ("event", 0)] * reps
        self.assertEqual(ops[-len(timed):], timed)
        self.assertEqual(driver.memsets, [])
        # Once for the prebuilt plan, then in every run.
        self.assertEqual(self.marshalled, 3 + 3 * (ta.WARMUP + reps))

    def test_no_flush_writes_nothing(self):
        _, trace, driver = self.timed("no-flush", 2)
        ops = self.runs(trace)
        self.assertNotIn("fill", [op[0] for op in ops])
        self.assertEqual(driver.memsets, [])

    def test_every_diagnostic_changes_one_thing_from_aligned(self):
        aligned = ta.METHODS["aligned"]
        for name, method in ta.METHODS.items():
            changed = [k for k in aligned if method[k] != aligned[k]]
            if name == "before":
                self.assertEqual(len(changed), 3)
            elif name == "aligned-again":
                self.assertEqual(changed, [])
            elif name != "aligned":
                self.assertEqual(len(changed), 1, name)

    def test_flush_size_is_twice_the_l2_within_bounds(self):
        self.assertEqual(ta.memset_flush_bytes(60 << 20), 120 << 20)
        self.assertEqual(ta.memset_flush_bytes(1 << 20), 16 << 20)
        self.assertEqual(ta.memset_flush_bytes(4 << 30), 1 << 30)
        self.assertEqual(ta.memset_flush_bytes((50 << 20) + 1) % 4, 0)


if __name__ == "__main__":
    unittest.main()
