// OpenAI Agents SDK (@openai/agents): a tool with needsApproval asks
// countersign, the run stops with an interruption, and it resumes with
// state.approve or state.reject once a human decided.
//
//   COUNTERSIGN_URL=… COUNTERSIGN_API_KEY=… node --import tsx openai-agents.ts
//
// The model is scripted (it always calls delete_branch once), so this runs
// without an OpenAI key; use your own model in practice.
import { Agent, Usage, run, tool, setTracingDisabled, type Model, type ModelResponse } from "@openai/agents";
import { randomUUID } from "node:crypto";
import { z } from "zod";
import { requestApproval, waitForDecision } from "./countersign.ts";

const deleteBranch = tool({
  name: "delete_branch",
  description: "Delete a branch of the remote repository",
  parameters: z.object({ repo: z.string(), branch: z.string() }),
  // Ask countersign as soon as the model calls the tool; the call id makes
  // a second ask the same operation.
  needsApproval: async (_ctx, input, callId) => {
    await requestApproval({ host: "openai-agents", tool: "delete_branch", toolInput: input, callId: callId ?? "" });
    return true;
  },
  execute: async ({ repo, branch }) => `deleted ${branch} in ${repo}`,
});

// A scripted model: first a call of delete_branch, then a last message.
class ScriptedModel implements Model {
  turn = 0;
  async getResponse(): Promise<ModelResponse> {
    const output: ModelResponse["output"] =
      this.turn++ === 0
        ? [{ type: "function_call", callId: `call_${randomUUID()}`, name: "delete_branch", status: "completed",
             arguments: JSON.stringify({ repo: "acme/app", branch: "old-release" }) }]
        : [{ type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "done" }] }];
    return { usage: new Usage(), output };
  }
  async *getStreamedResponse(): AsyncIterable<never> {
    throw new Error("not used");
  }
}

export async function main(): Promise<void> {
  setTracingDisabled(true);
  const agent = new Agent({ name: "ops", instructions: "Clean up branches.", model: new ScriptedModel(), tools: [deleteBranch] });
  let result = await run(agent, "Delete the old release branch of acme/app");
  const ran: string[] = [];
  while (result.interruptions?.length) {
    for (const item of result.interruptions) {
      const callId = (item.rawItem as { callId?: string }).callId ?? "";
      // The same REST calls: find the operation by its idempotency key, wait.
      const op = await requestApproval({ host: "openai-agents", tool: item.name ?? "", toolInput: JSON.parse(item.arguments ?? "{}"), callId });
      const d = await waitForDecision(op);
      console.error(`countersign: ${item.name}: ${d.reason} (operation ${op})`);
      if (d.approved) result.state.approve(item);
      else result.state.reject(item, { message: `Not approved: ${d.reason}` });
    }
    result = await run(agent, result.state);
  }
  for (const it of result.newItems) {
    if (it.type === "tool_call_output_item") ran.push(String(it.output));
  }
  console.log(JSON.stringify({ host: "openai-agents", final: result.finalOutput, toolOutputs: ran }));
}

if (import.meta.url === `file://${process.argv[1]}`) await main();
