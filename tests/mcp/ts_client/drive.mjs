// Drives Stash with the official TypeScript MCP SDK client (the one most MCP hosts and
// the MCP Inspector build on). Reads a plan (JSON file, argv[2]), writes what the client
// saw as JSON on stdout. Used by tests/mcp/test_ts_client.py; not a test by itself.
//
// plan = {target, auth_probes?, calls: [{tool, arguments, save?}]}
//   target       {kind: "stdio", command, args, env, cwd} | {kind: "http", url, token}
//   auth_probes  http targets whose connection must fail: the client's error is recorded
//   unknown_argument  if set, one more call per listed tool passing it (must be refused)
//   arguments    strings "$name.path.to.value" are replaced by that value of the
//                structured answer of the earlier call saved as `name`
import { readFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const plan = JSON.parse(readFileSync(process.argv[2], "utf8"));

function transportFor(target) {
  if (target.kind === "stdio") {
    return new StdioClientTransport({
      command: target.command, args: target.args, env: target.env, cwd: target.cwd, stderr: "inherit",
    });
  }
  const headers = target.token ? { Authorization: `Bearer ${target.token}` } : {};
  // no authProvider: a static bearer token, as a host configured with one sends it
  return new StreamableHTTPClientTransport(new URL(target.url), { requestInit: { headers } });
}

async function connect(target) {
  const client = new Client({ name: "stash-ts-sdk-test", version: "0" });
  const transport = transportFor(target);
  await client.connect(transport);
  // what the handshake told the client (the HTTP transport keeps the agreed revision)
  client.seen = { server: client.getServerVersion(), protocol: transport.protocolVersion ?? null };
  return client;
}

const saved = {};
function resolve(value) {
  if (typeof value === "string" && value.startsWith("$")) {
    const [name, ...path] = value.slice(1).split(".");
    let found = saved[name];
    for (const key of path) found = found?.[key];
    if (found === undefined) throw new Error(`unresolved placeholder ${value}`);
    return found;
  }
  if (Array.isArray(value)) return value.map(resolve);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, resolve(v)]));
  }
  return value;
}

const out = { auth: [], tools: [], calls: [] };
for (const probe of plan.auth_probes ?? []) {
  try {
    const client = await connect(probe);
    await client.listTools();
    out.auth.push({ connected: true });
    await client.close();
  } catch (error) {
    out.auth.push({ connected: false, name: error?.constructor?.name, code: error?.code, message: String(error?.message) });
  }
}

const client = await connect(plan.target);
out.server = client.seen;
const listed = await client.listTools(); // also makes the client validate answers against output schemas
out.tools = listed.tools.map((t) => ({ name: t.name, output_schema: Boolean(t.outputSchema) }));
const calls = [...plan.calls];
if (plan.unknown_argument) {
  for (const t of listed.tools) calls.push({ tool: t.name, arguments: { [plan.unknown_argument]: 1 }, label: "unknown" });
}
for (const call of calls) {
  const record = { tool: call.tool, label: call.label ?? call.tool };
  try {
    const result = await client.callTool({ name: call.tool, arguments: resolve(call.arguments ?? {}) });
    record.is_error = Boolean(result.isError);
    record.text = result.content?.[0]?.text ?? "";
    record.structured = result.structuredContent ?? null;
    record.meta = result._meta ?? null;
    if (call.save && result.structuredContent) saved[call.save] = result.structuredContent;
  } catch (error) {
    record.thrown = `${error?.constructor?.name}: ${error?.message}`;
  }
  out.calls.push(record);
}
await client.close();
process.stdout.write(JSON.stringify(out));
