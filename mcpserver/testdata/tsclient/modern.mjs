// Drives countersign's /mcp with the TypeScript SDK v2 client
// (@modelcontextprotocol/client), which negotiates the newest protocol
// revision (2026-07-28, probed with server/discover) where the server has
// it. Env: MCP_URL, API_KEY. Prints one JSON line per step on stdout.
import { Client, StreamableHTTPClientTransport } from "@modelcontextprotocol/client";

const out = (step, value) => console.log(JSON.stringify({ step, value }));

async function connect(key) {
  const transport = new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
    requestInit: { headers: key ? { Authorization: `Bearer ${key}` } : {} },
  });
  // "auto": probe with server/discover for 2026-07-28, fall back to initialize.
  const client = new Client({ name: "ts-sdk-v2-test", version: "0.0.0" }, { versionNegotiation: { mode: "auto" } });
  await client.connect(transport);
  return client;
}

try {
  await connect("");
  out("unauthenticated", "connected without a key");
} catch (e) {
  out("unauthenticated", { name: e.constructor?.name, message: String(e.message || e) });
}

const client = await connect(process.env.API_KEY);
out("negotiated", { version: client.getNegotiatedProtocolVersion(), era: client.getProtocolEra?.() });
const tools = await client.listTools();
out("tools", tools.tools.map((t) => t.name));
const r = await client.callTool({ name: "prepare_email", arguments: { to: ["client@example.com"], subject: "From the v2 SDK", text: "Hello" } });
out("prepare", { isError: !!r.isError, structured: r.structuredContent });
await client.close();
