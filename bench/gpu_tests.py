"""Run the gated test binaries and write h200-gpu-tests.json (bench/h200-gpu-tests.sh).

`targets [ROOT]`: print every gated test target (crate/target, e.g. peak-cuda/gpu), derived
from the code: a target is gated when its source can print "SKIPPED" (a string literal that
starts with SKIPPED), or calls a gate that can (a function or macro whose body prints it, in
peak-backend's src or in a test-support module the target declares, like tests/support).
`executables TARGETS`: read cargo's JSON messages on stdin, print "NAME PATH" for each test
binary named in TARGETS (space-separated crate/target).
`run DIR OUT [ROOT]`: derive the gated targets from ROOT's code again, run each binary DIR/NAME
one test at a time, classify every test as passed, failed or skipped (a gated test prints
"SKIPPED <name>: <why>" when its device or tool is missing), run `peak profile` once, and
write OUT/h200-gpu-tests.json. A binary that is missing, fails to list its tests or lists
none counts as one failed test (its key is BINARY_LEVEL), so a lost target cannot hide
behind "0 failed". Exits 1 when anything failed.

A failed test keeps why it failed (the panic's place and message, a time-out or the exit
status) and the last TAIL_LINES lines of its output, stdout and stderr interleaved as
written (an insta snapshot's diff among them), under "output_tail".

The tests run with INSTA_WORKSPACE_ROOT set to ROOT: insta finds its snapshot files under
the workspace root it asks `cargo metadata` for, and where no cargo is installed (the GPU
machine) it falls back to the crate's folder, looks for crates/X/crates/X/tests/snapshots,
and every snapshot test fails as "new". INSTA_UPDATE=no keeps it from writing .snap.new
files into the checkout.
"""

import concurrent.futures
import datetime
import json
import os
import re
import subprocess
import sys
import threading

# The key under which a binary's own failure (missing, unlistable, empty) is counted.
BINARY_LEVEL = "(binary)"

# Lines of a failed test's output kept in the JSON, and at most this many characters of them.
TAIL_LINES = 60
TAIL_CHARS = 12000

PANIC = re.compile(r"^thread '[^']*'(?: \(\d+\))? panicked at ([^\n]*?):?\n([^\n]*)", re.M)

SKIP_LITERAL = re.compile(r'"SKIPPED')
ITEM = re.compile(r"\bfn\s+(\w+)|\bmacro_rules!\s*(\w+)")
MOD_DECL = re.compile(r"^\s*(?:pub\s+)?mod\s+(\w+)\s*;", re.M)


def _read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def _strip_comments(text):
    """Line comments out (doc comments mention SKIPPED without printing it)."""
    return re.sub(r"//[^\n]*", "", text)


def gates(text):
    """Names of the functions and macros in `text` whose body holds a "SKIPPED literal:
    the nearest `fn NAME` or `macro_rules! NAME` before each occurrence."""
    text = _strip_comments(text)
    items = [(m.start(), m.group(1) or m.group(2), bool(m.group(2))) for m in ITEM.finditer(text)]
    found = set()
    for hit in SKIP_LITERAL.finditer(text):
        before = [item for item in items if item[0] < hit.start()]
        if before:
            _, name, is_macro = before[-1]
            found.add((name, is_macro))
    return found


def _calls(text, gate):
    name, is_macro = gate
    if is_macro:
        return re.search(rf"\b{name}\s*!", text) is not None
    # A call, not the definition.
    return re.search(rf"(?<!fn )\b{name}\s*\(", text) is not None


def test_targets(crate_dir):
    """(name, source path) of each integration-test target of one crate: tests/*.rs, and
    the [[test]] entries of its Cargo.toml (whose name can differ from the file)."""
    targets = {}
    tests = os.path.join(crate_dir, "tests")
    if os.path.isdir(tests):
        for f in sorted(os.listdir(tests)):
            if f.endswith(".rs"):
                targets[f[:-3]] = os.path.join(tests, f)
            elif os.path.isfile(os.path.join(tests, f, "main.rs")):
                targets[f] = os.path.join(tests, f, "main.rs")
    manifest = os.path.join(crate_dir, "Cargo.toml")
    if os.path.exists(manifest):
        for block in re.split(r"^\[\[test\]\]\s*$", _read(manifest), flags=re.M)[1:]:
            block = re.split(r"^\[", block, flags=re.M)[0]
            name = re.search(r'^\s*name\s*=\s*"([^"]+)"', block, re.M)
            path = re.search(r'^\s*path\s*=\s*"([^"]+)"', block, re.M)
            if name and path:
                targets = {n: p for n, p in targets.items() if p != os.path.join(crate_dir, path.group(1))}
                targets[name.group(1)] = os.path.join(crate_dir, path.group(1))
    return targets


def gated_targets(root="."):
    """Every gated test target under ROOT/crates, as sorted "crate/target" strings."""
    crates = os.path.join(root, "crates")
    shared = set()  # gates any test can reach through peak-backend's src
    backend_src = os.path.join(crates, "peak-backend", "src")
    if os.path.isdir(backend_src):
        for f in sorted(os.listdir(backend_src)):
            if f.endswith(".rs"):
                shared |= gates(_read(os.path.join(backend_src, f)))
    result = []
    for crate in sorted(os.listdir(crates)):
        crate_dir = os.path.join(crates, crate)
        for name, path in sorted(test_targets(crate_dir).items()):
            if not os.path.exists(path):
                continue
            text = _strip_comments(_read(path))
            reachable = set(shared)
            for module in MOD_DECL.findall(text):
                for candidate in (os.path.join(os.path.dirname(path), module, "mod.rs"), os.path.join(os.path.dirname(path), module + ".rs")):
                    if os.path.exists(candidate):
                        module_text = _read(candidate)
                        # A support module's gates count where the target calls them.
                        reachable |= gates(module_text)
                        break
            if SKIP_LITERAL.search(text) or any(_calls(text, g) for g in reachable):
                result.append(f"{crate}/{name}")
    return result


def binary_name(target):
    crate, test = target.split("/")
    return f"{crate}-{test}"


def executables(targets):
    wanted = {tuple(t.split("/")) for t in targets.split()}
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except json.JSONDecodeError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
            continue
        if msg["target"]["kind"] != ["test"]:
            continue
        # src_path is .../crates/<crate>/tests/<file>.rs
        crate = msg["target"]["src_path"].split("/crates/")[-1].split("/")[0]
        key = (crate, msg["target"]["name"])
        if key in wanted:
            print(binary_name("/".join(key)), msg["executable"])


def output_tail(text, lines=TAIL_LINES, chars=TAIL_CHARS):
    """The last `lines` lines of `text`, and of those at most the last `chars` characters."""
    tail = "\n".join(text.rstrip("\n").split("\n")[-lines:])
    return tail[-chars:]


def failure_reason(text, code):
    """One line on why a test failed: where it panicked and its message, else how it ended."""
    panic = PANIC.search(text)
    if panic:
        return f"panicked at {panic.group(1)}: {panic.group(2)}".rstrip(": ")
    if code is None:
        return text.strip().split("\n")[-1]
    return f"exited {code}"


def test_env(root):
    """The environment a test binary runs in: insta's workspace root is ROOT (see the
    module doc) and no snapshot is written."""
    return {**os.environ, "INSTA_WORKSPACE_ROOT": os.path.abspath(root), "INSTA_UPDATE": "no"}


def run_binary(path, timeout=600, root="."):
    """Each test of one binary, by name: {"outcome", "why"?, "output_tail"?}. A binary that
    cannot list its tests, or lists none, is one failed entry under BINARY_LEVEL."""
    env = test_env(root)
    try:
        listing = subprocess.run([path, "--list", "--format", "terse"], capture_output=True, text=True, timeout=120, env=env)
    except (OSError, subprocess.SubprocessError) as e:
        return {BINARY_LEVEL: {"outcome": "failed", "why": f"cannot list its tests: {e}"}}
    if listing.returncode != 0:
        return {BINARY_LEVEL: {"outcome": "failed", "why": f"--list exited {listing.returncode}", "output_tail": output_tail(listing.stdout + listing.stderr)}}
    names = [l[: -len(": test")] for l in listing.stdout.splitlines() if l.endswith(": test")]
    if not names:
        return {BINARY_LEVEL: {"outcome": "failed", "why": "lists no tests"}}
    results = {}
    for name in names:
        try:
            # One stream, so that the tail reads in the order things were written.
            proc = subprocess.run([path, "--exact", name, "--nocapture", "--test-threads", "1"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, errors="replace", timeout=timeout, env=env)
            text, code = proc.stdout, proc.returncode
        except subprocess.TimeoutExpired as e:
            said = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            text, code = f"{said}\ntimed out after {timeout} s", None
        except OSError as e:
            text, code = f"cannot run: {e}", None
        skipped = re.search(r"SKIPPED[^\n]*", text)
        ran = re.search(r"\b([1-9]\d*) passed\b", text)
        tail = None
        if code != 0:
            outcome, why, tail = "failed", failure_reason(text, code), output_tail(text)
        elif re.search(rf"^test {re.escape(name)} \.\.\. ignored", text, re.M):
            outcome, why = "failed", "ignored: the test does not run"
        elif not ran:
            outcome, why, tail = "failed", "exited 0 but reports no test passed", output_tail(text)
        elif skipped:
            outcome, why = "skipped", skipped.group(0)
        else:
            outcome, why = "passed", None
        results[name] = {"outcome": outcome, **({"why": why} if why else {}), **({"output_tail": tail} if tail is not None else {})}
        print(f"{outcome:8s} {os.path.basename(path)} {name}" + (f": {why}" if outcome == "failed" else ""), flush=True)
    return results


def profile():
    """peak profile (Nsight Compute) on the naive CUDA example: its headline figures."""
    try:
        proc = subprocess.run(["target/release/peak", "profile", "examples/matmul-cuda-f32", "--set", "n=1024", "--set", "BLOCK_X=16", "--set", "BLOCK_Y=16", "--json"],
                              capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.SubprocessError) as e:
        return {"outcome": "failed", "why": str(e)}
    if proc.returncode != 0:
        return {"outcome": "failed", "why": proc.stderr[-4000:]}
    report = json.loads(proc.stdout)
    metrics = sum(len(k.get("metrics") or {}) for k in report.get("kernels", []))
    headline = report.get("headline") or {}
    ok = metrics > 0 and (headline.get("duration_ms") or 0) > 0
    return {"outcome": "passed" if ok else "failed", "metrics": metrics, "headline": headline}


def _device():
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError as e:
        return f"no nvidia-smi ({e})"


def run(folder, out, root=".", with_profile=True, timeout=600):
    """Run every gated binary of ROOT's code found in FOLDER; write OUT/h200-gpu-tests.json
    and return the result. The file is rewritten after each binary ("complete": false and
    the targets not yet run), so a run cut short still leaves what it found."""
    targets = gated_targets(root)
    commit_file = os.path.join(folder, "commit")
    commit = _read(commit_file).strip() if os.path.exists(commit_file) else None
    device = _device()
    os.makedirs(out, exist_ok=True)
    tests = {}
    lock = threading.Lock()

    def write(complete):
        ordered = {binary_name(t): tests[binary_name(t)] for t in targets if binary_name(t) in tests}
        ordered.update({k: v for k, v in tests.items() if k not in ordered})
        outcomes = [r["outcome"] for binary in ordered.values() for r in binary.values()]
        result = {
            "benchmark": "gpu-tests",
            "command": "bash bench/h200-gpu-tests.sh run",
            "device": device,
            "commit": commit,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "complete": complete,
            "targets": targets,
            **({} if complete else {"not_yet_run": [t for t in targets if binary_name(t) not in tests]}),
            "run": len(outcomes),
            "passed": outcomes.count("passed"),
            "failed": outcomes.count("failed"),
            "skipped": outcomes.count("skipped"),
            "skip_reasons": sorted({r["why"].split(": ", 1)[-1] for b in ordered.values() for r in b.values() if r["outcome"] == "skipped"}),
            "tests": ordered,
        }
        with open(os.path.join(out, "h200-gpu-tests.json"), "w") as f:
            json.dump(result, f, indent=1)
        return result

    def one(target):
        name = binary_name(target)
        path = os.path.join(folder, name)
        results = run_binary(path, timeout, root) if os.path.exists(path) else {BINARY_LEVEL: {"outcome": "failed", "why": "binary not carried"}}
        if BINARY_LEVEL in results:
            print(f"failed   {name}: {results[BINARY_LEVEL]['why'][:200]}", flush=True)
        with lock:
            tests[name] = results
            write(False)

    # GPU_TESTS_JOBS binaries at a time (each runs its tests one by one); 1 by default, so
    # that no two tests share the GPU.
    jobs = max(1, int(os.environ.get("GPU_TESTS_JOBS", "1")))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, targets))
    if with_profile:
        tests["peak profile"] = {"examples/matmul-cuda-f32": profile()}
    result = write(True)
    print(json.dumps({k: result[k] for k in ("device", "commit", "run", "passed", "failed", "skipped")}))
    return result


if __name__ == "__main__":
    command = sys.argv[1] if len(sys.argv) > 1 else ""
    if command == "targets":
        print("\n".join(gated_targets(sys.argv[2] if len(sys.argv) > 2 else ".")))
    elif command == "executables":
        executables(sys.argv[2])
    elif command == "run":
        result = run(sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else ".")
        sys.exit(1 if result["failed"] else 0)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
