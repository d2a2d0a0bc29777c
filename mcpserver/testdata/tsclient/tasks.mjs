// Drives countersign's /mcp with the TypeScript SDK's experimental tasks
// (protocol 2025-11-25, client.experimental.tasks). Env: MCP_URL,
// MCP_URL2 (another replica on the same store), API_KEY. Prints one JSON
// line per step; after a "decide" step the Go test decides as the human.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema } from "@modelcontextprotocol/sdk/types.js";

const out = (step, value) => console.log(JSON.stringify({ step, value }));

async function connect(url, tasks) {
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${process.env.API_KEY}` } },
  });
  const capabilities = tasks ? { tasks: { list: {}, cancel: {} } } : {};
  const client = new Client({ name: "ts-sdk-tasks-test", version: "0.0.0" }, { capabilities });
  await client.connect(transport);
  await client.listTools(); // learns which tools run as tasks
  return client;
}

const client = await connect(process.env.MCP_URL, true);
out("capabilities", client.getServerCapabilities().tasks ?? null);

const prepare = async (c, subject) => {
  const r = await c.callTool({ name: "prepare_email", arguments: { to: ["client@example.com"], subject, text: "Hello" } });
  return r.structuredContent.operation_key;
};

// Sends key as a task; once it is created the Go test decides; returns
// every message of the stream.
async function sendAsTask(key, decision, onCreated) {
  const seen = [];
  const stream = client.experimental.tasks.callToolStream({ name: "send_operation", arguments: { operation_key: key } });
  for await (const m of stream) {
    if (m.type === "taskCreated") {
      seen.push({ type: m.type, task: m.task });
      if (onCreated) await onCreated(m.task);
      else out("decide", { key, ...decision });
    } else if (m.type === "taskStatus") {
      seen.push({ type: m.type, status: m.task.status, statusMessage: m.task.statusMessage });
    } else if (m.type === "result") {
      seen.push({ type: m.type, isError: !!m.result.isError, structured: m.result.structuredContent, text: m.result.content.map((c) => c.text).join("\n") });
    } else {
      seen.push({ type: m.type, error: String(m.error?.message ?? m.error) });
    }
  }
  return seen;
}

const approved = await prepare(client, "Approve me");
out("approved", await sendAsTask(approved, { approve: true }));

const replica = await connect(process.env.MCP_URL2, true);
out("replica", await replica.experimental.tasks.getTask(approved));

const rejected = await prepare(client, "Reject me");
out("rejected", await sendAsTask(rejected, { approve: false, reason: "not to this client" }));
out("rejectedTask", await client.experimental.tasks.getTask(rejected));
const rr = await client.experimental.tasks.getTaskResult(rejected, CallToolResultSchema);
out("rejectedResult", { isError: !!rr.isError, structured: rr.structuredContent });

const canceled = await prepare(client, "Cancel me");
let cancelAnswer = null;
out("canceled", await sendAsTask(canceled, null, async (task) => {
  cancelAnswer = await client.experimental.tasks.cancelTask(task.taskId);
}));
out("cancelAnswer", cancelAnswer);
out("list", (await client.experimental.tasks.listTasks()).tasks.map((t) => ({ taskId: t.taskId, status: t.status })));

// Without the tasks capability, results are as they always were.
const plain = await connect(process.env.MCP_URL, false);
const key = await prepare(plain, "Plain");
const r = await plain.callTool({ name: "send_operation", arguments: { operation_key: key } });
out("plain", { isError: !!r.isError, structured: r.structuredContent, capabilities: plain.getServerCapabilities().tasks ?? null });

await Promise.all([client.close(), replica.close(), plain.close()]);
