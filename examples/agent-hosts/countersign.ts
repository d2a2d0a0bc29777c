// The REST calls every agent host makes (docs/agent-hosts.md): prepare and
// send a host.tool_call operation for one exact tool call, then long-poll
// until a human decided. The host runs the tool only on "approved".
//
// Environment: COUNTERSIGN_URL (a running countersign serve) and
// COUNTERSIGN_API_KEY (an agent key whose principal has scope host.tool_call).

export type ToolCall = {
  host: string; // "openai-agents", "langgraph"
  tool: string;
  toolInput: Record<string, unknown>;
  callId: string; // the host's id of this call: asking twice asks once
};

export type Decision = {
  approved: boolean;
  operation: string;
  reason: string; // for the model when not approved
  receipt?: string; // signed by countersign: who approved this exact call
};

const base = (process.env.COUNTERSIGN_URL ?? "").replace(/\/$/, "");
const key = process.env.COUNTERSIGN_API_KEY ?? "";

async function call(method: string, path: string, body?: unknown): Promise<any> {
  if (!base || !key) throw new Error("set COUNTERSIGN_URL and COUNTERSIGN_API_KEY");
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  if (!res.ok) throw new Error(`countersign: ${json.error?.code}: ${json.error?.message}`);
  return json;
}

// requestApproval prepares and sends the operation and returns its key.
export async function requestApproval(c: ToolCall): Promise<string> {
  let op = await call("POST", "/v1/operations", {
    action: "host.tool_call",
    input: { host: c.host, tool: c.tool, tool_input: c.toolInput },
    idempotency_key: `${c.host}:${c.callId}`,
  });
  if (op.status === "draft") op = await call("POST", `/v1/operations/${op.operation_key}/send`);
  return op.operation_key;
}

const terminal = new Set(["succeeded", "failed", "rejected", "expired", "canceled", "superseded"]);

// waitForDecision long-polls (30 s per request) until the operation ends or
// timeoutMs passes; then it withdraws the request. Anything but
// "succeeded" is a denial.
export async function waitForDecision(operation: string, timeoutMs = 10 * 60_000): Promise<Decision> {
  const deadline = Date.now() + timeoutMs;
  let op = await call("GET", `/v1/operations/${operation}`);
  while (!terminal.has(op.status)) {
    const left = deadline - Date.now();
    if (left <= 0) {
      op = await call("POST", `/v1/operations/${operation}/cancel`).catch(() => op);
      if (op.status !== "succeeded") return { approved: false, operation, reason: "no decision in time" };
      break;
    }
    const wait = Math.max(1, Math.min(30, Math.floor(left / 1000)));
    op = await call("GET", `/v1/operations/${operation}?wait=${wait}`);
  }
  if (op.status === "succeeded") {
    const who = op.approval.approvals.map((a: { approver: string }) => a.approver).join(", ");
    return { approved: true, operation, reason: `approved by ${who}`, receipt: op.result?.receipt };
  }
  const r = op.approval.rejection;
  const reason = r ? `${r.approver} rejected it${r.reason ? ": " + r.reason : ""}` : `the request ended ${op.status}`;
  return { approved: false, operation, reason };
}
