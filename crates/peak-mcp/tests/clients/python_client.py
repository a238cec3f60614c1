"""`peak mcp` driven by the official Python SDK (`mcp` from PyPI): every tool of
scenario.json on OpenCL, each result checked by the SDK against the tool's output schema.

    python_client.py PATH/TO/peak

Exits 0 when every step answered as the scenario expects, 1 otherwise (naming the step).
"""

import asyncio
import json
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]


def fake_llm(reply):
    """An OpenAI-compatible server answering every chat completion with `reply`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps({
                "id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": "fake-coder",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/v1"


def fill(value, places):
    """`value` with every {placeholder} in its strings replaced."""
    if isinstance(value, str):
        for key, text in places.items():
            value = value.replace("{" + key + "}", text)
        return value
    if isinstance(value, list):
        return [fill(v, places) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, places) for k, v in value.items()}
    return value


def numeric_formats(schema, path="$"):
    """Where `schema` gives an integer or number a `format` (not JSON Schema's)."""
    found = []
    if isinstance(schema, dict):
        if schema.get("type") in ("integer", "number") and "format" in schema:
            found.append(f"{path}: {schema['format']}")
        for key, sub in schema.items():
            found += numeric_formats(sub, f"{path}.{key}")
    elif isinstance(schema, list):
        for i, sub in enumerate(schema):
            found += numeric_formats(sub, f"{path}[{i}]")
    return found


def check_tools(tools):
    for tool in tools:
        if tool.output_schema is None or tool.output_schema.get("type") != "object":
            raise AssertionError(f"{tool.name}: no object output schema")
        bad = numeric_formats(tool.input_schema) + numeric_formats(tool.output_schema)
        if bad:
            raise AssertionError(f"{tool.name}: non-standard formats {bad}")


def check_progress(name, seen):
    if not seen:
        raise AssertionError(f"{name}: no progress notification")
    values = [p for p, _, _ in seen]
    if any(b <= a for a, b in zip(values, values[1:])):
        raise AssertionError(f"{name}: progress does not rise: {values}")
    totals = [(p, t) for p, t, _ in seen if t is not None]
    if not totals:
        raise AssertionError(f"{name}: no progress notification carries a total: {seen}")
    if any(p > t for p, t in totals):
        raise AssertionError(f"{name}: progress past its total: {totals}")


async def step(session, number, spec, places):
    name, args = spec["tool"], fill(spec["args"], places)
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    label = f"step {number} ({name})"
    try:
        result = await session.call_tool(name, args, progress_callback=on_progress)
    except Exception as e:  # the SDK refusing the answer (its output schema, its shape)
        raise AssertionError(f"{label}: the SDK refused the answer: {type(e).__name__}: {e}") from e
    text = "".join(getattr(c, "text", "") for c in result.content)
    expect = spec.get("expect", "ok")
    if expect != "any" and result.is_error != (expect == "error"):
        raise AssertionError(f"{label}: expected {expect}, got is_error={result.is_error}:\n{text[:3000]}")
    if "contains" in spec and spec["contains"] not in text:
        raise AssertionError(f"{label}: the answer lacks {spec['contains']!r}:\n{text[:3000]}")
    if not result.is_error and not isinstance(result.structured_content, dict):
        raise AssertionError(f"{label}: structuredContent is not an object: {result.structured_content!r}")
    if spec.get("progress"):
        check_progress(label, seen)
    print(f"ok  {label}: {len(text)} chars, {len(seen)} progress notifications", flush=True)


async def main(peak):
    scenario = json.loads((HERE / "scenario.json").read_text())
    server, llm = fake_llm(scenario["llm_reply"])
    with tempfile.TemporaryDirectory(prefix="peak-mcp-python-") as tmp:
        places = {"examples": str(ROOT / "examples"), "fixtures": str(HERE.parent / "fixtures"), "clients": str(HERE), "tmp": tmp, "llm": llm}
        env = {"PEAK_CACHE_DIR": str(Path(tmp) / "cache")}
        params = StdioServerParameters(command=peak, args=["mcp"], env=env, cwd=str(ROOT))
        failure = None
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                try:
                    await session.initialize()
                    await run(session, scenario, places)
                except AssertionError as e:
                    failure = str(e)
    server.shutdown()
    return failure


async def run(session, scenario, places):
    tools = (await session.list_tools()).tools
    check_tools(tools)
    called = set()
    for number, spec in enumerate(scenario["steps"], 1):
        await step(session, number, spec, places)
        called.add(spec["tool"])
    missed = sorted({t.name for t in tools} - called)
    if missed:
        raise AssertionError(f"tools the scenario never calls: {missed}")
    print(f"Python SDK client: {len(scenario['steps'])} steps, all {len(tools)} tools called")


if __name__ == "__main__":
    failure = asyncio.run(main(sys.argv[1]))
    if failure:
        print(f"FAIL: {failure}", file=sys.stderr)
        sys.exit(1)
