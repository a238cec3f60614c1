// `peak mcp` driven by the official TypeScript SDK (@modelcontextprotocol/sdk from npm):
// every tool of scenario.json on OpenCL, each result checked by the SDK against the tool's
// output schema.
//
//     node node_client.mjs PATH/TO/peak
//
// Exits 0 when every step answered as the scenario expects, 1 otherwise (naming the step).

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../../..");

// An OpenAI-compatible server answering every chat completion with `reply`.
async function fakeLlm(reply) {
    const server = createServer((req, res) => {
        req.resume();
        req.on("end", () => {
            const body = JSON.stringify({
                id: "chatcmpl-fake", object: "chat.completion", created: 0, model: "fake-coder",
                choices: [{ index: 0, message: { role: "assistant", content: reply }, finish_reason: "stop" }],
                usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 },
            });
            res.writeHead(200, { "Content-Type": "application/json" });
            res.end(body);
        });
    });
    await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
    return { server, url: `http://127.0.0.1:${server.address().port}/v1` };
}

// `value` with every {placeholder} in its strings replaced.
function fill(value, places) {
    if (typeof value === "string") {
        return Object.entries(places).reduce((s, [k, v]) => s.split(`{${k}}`).join(v), value);
    }
    if (Array.isArray(value)) return value.map((v) => fill(v, places));
    if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, places)]));
    return value;
}

// Where `schema` gives an integer or number a `format` (not JSON Schema's).
function numericFormats(schema, path = "$") {
    if (Array.isArray(schema)) return schema.flatMap((s, i) => numericFormats(s, `${path}[${i}]`));
    if (!schema || typeof schema !== "object") return [];
    const here = ["integer", "number"].includes(schema.type) && "format" in schema ? [`${path}: ${schema.format}`] : [];
    return here.concat(Object.entries(schema).flatMap(([k, s]) => numericFormats(s, `${path}.${k}`)));
}

function checkTools(tools) {
    for (const tool of tools) {
        if (tool.outputSchema?.type !== "object") throw new Error(`${tool.name}: no object output schema`);
        const bad = numericFormats(tool.inputSchema).concat(numericFormats(tool.outputSchema));
        if (bad.length) throw new Error(`${tool.name}: non-standard formats ${bad}`);
    }
}

function checkProgress(label, seen) {
    if (!seen.length) throw new Error(`${label}: no progress notification`);
    const values = seen.map((p) => p.progress);
    if (values.some((v, i) => i > 0 && v <= values[i - 1])) throw new Error(`${label}: progress does not rise: ${values}`);
    const totals = seen.filter((p) => p.total !== undefined);
    if (!totals.length) throw new Error(`${label}: no progress notification carries a total`);
    if (totals.some((p) => p.progress > p.total)) throw new Error(`${label}: progress past its total: ${JSON.stringify(totals)}`);
}

async function step(client, number, spec, places) {
    const label = `step ${number} (${spec.tool})`;
    const seen = [];
    const options = { timeout: 600_000, resetTimeoutOnProgress: true, onprogress: (p) => seen.push(p) };
    let result;
    try {
        result = await client.callTool({ name: spec.tool, arguments: fill(spec.args, places) }, undefined, options);
    } catch (e) {
        // The SDK refusing the answer (its output schema, its shape).
        throw new Error(`${label}: the SDK refused the answer: ${e.message}`);
    }
    const text = result.content.map((c) => c.text ?? "").join("");
    const expect = spec.expect ?? "ok";
    if (expect !== "any" && Boolean(result.isError) !== (expect === "error")) {
        throw new Error(`${label}: expected ${expect}, got isError=${result.isError}:\n${text.slice(0, 3000)}`);
    }
    if (spec.contains && !text.includes(spec.contains)) throw new Error(`${label}: the answer lacks ${JSON.stringify(spec.contains)}:\n${text.slice(0, 3000)}`);
    const data = result.structuredContent;
    if (!result.isError && (!data || typeof data !== "object" || Array.isArray(data))) throw new Error(`${label}: structuredContent is not an object`);
    if (spec.progress) checkProgress(label, seen);
    console.log(`ok  ${label}: ${text.length} chars, ${seen.length} progress notifications`);
}

async function main(peak) {
    const scenario = JSON.parse(readFileSync(join(here, "scenario.json"), "utf8"));
    const llm = await fakeLlm(scenario.llm_reply);
    const tmp = mkdtempSync(join(tmpdir(), "peak-mcp-node-"));
    const places = { examples: join(root, "examples"), fixtures: join(here, "..", "fixtures"), clients: here, tmp, llm: llm.url };
    const transport = new StdioClientTransport({ command: peak, args: ["mcp"], cwd: root, env: { PEAK_CACHE_DIR: join(tmp, "cache") }, stderr: "inherit" });
    const client = new Client({ name: "peak-node-client", version: "1.0.0" });
    try {
        await client.connect(transport);
        const { tools } = await client.listTools();
        checkTools(tools);
        const called = new Set();
        for (const [i, spec] of scenario.steps.entries()) {
            await step(client, i + 1, spec, places);
            called.add(spec.tool);
        }
        const missed = tools.map((t) => t.name).filter((n) => !called.has(n));
        if (missed.length) throw new Error(`tools the scenario never calls: ${missed}`);
        console.log(`TypeScript SDK client: ${scenario.steps.length} steps, all ${tools.length} tools called`);
    } finally {
        await client.close();
        llm.server.close();
        rmSync(tmp, { recursive: true, force: true });
    }
}

main(process.argv[2]).catch((e) => {
    console.error(`FAIL: ${e.message}`);
    process.exit(1);
});
