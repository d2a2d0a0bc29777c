// LangGraph (@langchain/langgraph): the tool node calls interrupt() with
// the exact tool call; the driver asks countersign, waits for the human,
// and resumes the graph with Command({resume: decision}). The checkpointer
// keeps the paused run, so the driver may also stop and resume it later.
//
//   COUNTERSIGN_URL=… COUNTERSIGN_API_KEY=… node --import tsx langgraph.ts
//
// The "agent" node is scripted (it always proposes one tool call), so this
// runs without a model; put your model node there in practice.
import { randomUUID } from "node:crypto";
import { Annotation, Command, END, MemorySaver, START, StateGraph, interrupt } from "@langchain/langgraph";
import { requestApproval, waitForDecision, type Decision } from "./countersign.ts";

type ToolCall = { id: string; name: string; args: Record<string, unknown> };

const State = Annotation.Root({
  call: Annotation<ToolCall | null>(),
  outcome: Annotation<string>(),
});

const tools: Record<string, (args: any) => Promise<string>> = {
  write_file: async ({ path, content }) => `wrote ${String(content).length} bytes to ${path}`,
};

const graph = new StateGraph(State)
  .addNode("agent", async () => ({
    call: { id: `call_${randomUUID()}`, name: "write_file", args: { path: "/srv/app/config.yaml", content: "replicas: 3\n" } },
  }))
  .addNode("tools", async (s) => {
    const call = s.call!;
    // Pauses the run until the driver resumes it with the human's decision.
    const d = interrupt<ToolCall, Decision>(call);
    if (!d.approved) return { outcome: `not run: ${d.reason}` };
    return { outcome: await tools[call.name](call.args) };
  })
  .addEdge(START, "agent")
  .addEdge("agent", "tools")
  .addEdge("tools", END)
  .compile({ checkpointer: new MemorySaver() });

export async function main(): Promise<void> {
  const config = { configurable: { thread_id: randomUUID() } };
  let state: any = await graph.invoke({ call: null, outcome: "" }, config);
  while (state.__interrupt__?.length) {
    const call = state.__interrupt__[0].value as ToolCall;
    const op = await requestApproval({ host: "langgraph", tool: call.name, toolInput: call.args, callId: call.id });
    const d = await waitForDecision(op);
    console.error(`countersign: ${call.name}: ${d.reason} (operation ${op})`);
    state = await graph.invoke(new Command({ resume: d }), config);
  }
  console.log(JSON.stringify({ host: "langgraph", outcome: state.outcome }));
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
