// report: renders Markdown reports from findings (render) or from a workflow's task results
// (render_workflow). Deterministic, no I/O. Served as `node dist/agent.js` by the host.
import { Agent, AgentError } from "@ether/agent";
import { renderFindings, renderWorkflow, type RenderParams, type RenderWorkflowParams } from "./render.js";

export const agent = new Agent({
  name: "report",
  version: "1.0.0",
  description: "Renders a Markdown report from findings or from the results of a workflow.",
  tags: ["report", "markdown"],
  maxConcurrency: 8,
});

const finding = {
  type: "object",
  properties: {
    title: { type: "string" },
    severity: { type: "string" },
    file: { type: "string" },
    detail: { type: "string" },
    data: {},
  },
};

agent.action<RenderParams>(
  "render",
  {
    description:
      "Render findings [{title, severity?, file?, detail?, data?}] as Markdown: a summary table by severity and a section per finding, worst first. Returns {markdown, sections, counts}.",
    schema: {
      type: "object",
      required: ["findings"],
      properties: {
        title: { type: "string" },
        summary: { type: "string" },
        findings: { type: "array", items: finding },
      },
    },
    idempotent: true,
  },
  (params) => renderFindings(params),
);

agent.action<RenderWorkflowParams>(
  "render_workflow",
  {
    description:
      "Render a workflow's task results (AgentOutput-like objects) as Markdown: a summary table and a section per task. Returns {markdown, sections, totals}.",
    schema: {
      type: "object",
      required: ["results"],
      properties: {
        title: { type: "string" },
        summary: { type: "string" },
        results: { type: "array", items: { type: "object" } },
      },
    },
    idempotent: true,
  },
  (params) => {
    if (params.results.length > 10_000) throw new AgentError("invalid_params", "at most 10000 results per report");
    return renderWorkflow(params);
  },
);

export default agent;

await agent.serve();
