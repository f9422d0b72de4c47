// The official AG-UI client (@ag-ui/client's HttpAgent, which verifies the event order itself)
// against a served flow: run, answer the interrupt, print what it saw as one JSON line.
// Usage: node agui_client.mjs MODULE_DIR BASE_URL THREAD_ID
import { createRequire } from "node:module";

const [moduleDir, base, threadId] = process.argv.slice(2);
const require = createRequire(`${moduleDir}/`);
const { HttpAgent } = require("@ag-ui/client");

const agent = new HttpAgent({
  url: `${base}/agui`,
  threadId,
  initialMessages: [{ id: "m1", role: "user", content: "check the db" }],
});
const runs = [];
async function run(params) {
  const seen = { types: [], outcome: null, interrupts: [], error: null };
  await agent.runAgent(params, {
    onEvent({ event }) { seen.types.push(event.type); },
    onRunFinishedEvent(p) { seen.outcome = p.outcome; seen.interrupts = p.interrupts ?? []; },
    onRunFailed({ error }) { seen.error = String(error); },
  });
  runs.push(seen);
  return seen;
}
try {
  const first = await run({ runId: "r1" });
  const pause = first.interrupts[0];
  await run({ runId: "r2", resume: [{ interruptId: pause.id, status: "resolved", payload: "yes" }] });
  const text = agent.messages.filter((m) => m.role === "assistant").map((m) => m.content);
  console.log(JSON.stringify({ runs, assistant: text, question: pause.message }));
} catch (err) {
  console.log(JSON.stringify({ runs, failed: String(err && err.stack || err) }));
  process.exitCode = 1;
}
