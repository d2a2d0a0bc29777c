// Drives countersign's /mcp with the official TypeScript SDK client.
// Env: MCP_URL, API_KEY. Prints one JSON line per step on stdout; after
// "waiting", the Go test approves the operation as the human.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { extractWWWAuthenticateParams, discoverOAuthProtectedResourceMetadata } from "@modelcontextprotocol/sdk/client/auth.js";

const out = (step, value) => console.log(JSON.stringify({ step, value }));

async function connect(key) {
  const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
    requestInit: { headers: key ? { Authorization: `Bearer ${key}` } : {} },
  });
  const client = new Client({ name: "ts-sdk-test", version: "0.0.0" });
  await client.connect(transport);
  return client;
}

try {
  await connect("");
  out("unauthenticated", "connected without a key");
} catch (e) {
  out("unauthenticated", String(e.message || e));
}

// What an OAuth-capable client reads from a refusal: the challenge's
// resource_metadata, and the RFC 9728 metadata it points at.
{
  const res = await fetch(process.env.MCP_URL, { method: "POST", headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "0" } } }) });
  const params = extractWWWAuthenticateParams(res);
  let metadata = null;
  try {
    metadata = await discoverOAuthProtectedResourceMetadata(process.env.MCP_URL, { resourceMetadataUrl: params.resourceMetadataUrl });
  } catch (e) {
    metadata = { discoveryError: String(e.message || e) };
  }
  out("auth", { status: res.status, challenge: res.headers.get("www-authenticate"), resourceMetadataUrl: params.resourceMetadataUrl?.href ?? null, metadata });
}

const client = await connect(process.env.API_KEY);
out("server", { version: client.getServerVersion(), instructions: client.getInstructions() });
const tools = await client.listTools();
out("tools", tools.tools.map((t) => ({ name: t.name, annotations: t.annotations, hasOutputSchema: !!t.outputSchema })));

// callTool validates structuredContent against the tool's outputSchema.
const call = async (name, args) => {
  const r = await client.callTool({ name, arguments: args });
  return { isError: !!r.isError, text: r.content.map((c) => c.text).join("\n"), structured: r.structuredContent };
};
const prepared = await call("prepare_email", { to: ["client@example.com"], subject: "From TypeScript", text: "Hello" });
out("prepare", prepared);
const key = prepared.structured.operation_key;
out("send", await call("send_operation", { operation_key: key }));
out("bad", await call("get_operation_status", { operation_key: key, wait_seconds: 31 }));
out("waiting", key);
out("status", await call("get_operation_status", { operation_key: key, wait_seconds: 30 }));
await client.close();
