import { describe, expect, it } from "vitest";
import { fieldErrors, prefillFor, runPayload, writtenSummary } from "../src/transforms/forms.js";
import { filtersFromQuery, format, progressLine, runOutcome, runsQuery, runsSummary, statusLabel, vendorComparison, vendorSpeedup } from "../src/transforms/runs.js";

const good = { task: "relu", source: "__global__ void k() {}", plan: '{"launches": []}', budget: "12", judge: "rules", seed: "0" };

describe("runPayload", () => {
  it("builds the POST body with numbers and the parsed plan", () => {
    expect(runPayload({ ...good, team: "3" })).toEqual({ errors: {}, payload: {
      task: "relu", source: good.source, plan: { launches: [] }, budget: 12, judge: "rules", seed: 0, team: 3 } });
  });
  it("reports each bad field before anything is sent", () => {
    const { payload, errors } = runPayload({ ...good, plan: "{launches", budget: "0", seed: "x", judge: "oracle", source: " " });
    expect(payload).toBeNull();
    expect(Object.keys(errors).sort()).toEqual(["budget", "judge", "plan", "seed", "source"]);
    expect(errors.plan[0]).toMatch(/Not valid JSON/);
  });
  it("sends the intent and a chosen subset of proposal sources only when given", () => {
    const { payload } = runPayload({ ...good, intent: " row softmax ", sources: ["tunable"] });
    expect(payload).toMatchObject({ intent: "row softmax", sources: ["tunable"] });
    expect(runPayload({ ...good, intent: "", sources: null }).payload).not.toHaveProperty("sources");
  });
  it("names the writing job the kernel came from only when there is one", () => {
    expect(runPayload({ ...good, writingJob: 7 }).payload).toMatchObject({ writing_job: 7 });
    expect(runPayload({ ...good, writingJob: null }).payload).not.toHaveProperty("writing_job");
  });
  it("turns the screen off only when asked: the server screens by default", () => {
    expect(runPayload({ ...good, screen: false }).payload).toMatchObject({ screen: false });
    expect(runPayload({ ...good, screen: true }).payload).not.toHaveProperty("screen");
  });
  it("sends how many evaluations may run at once only when more than one, and checks it", () => {
    expect(runPayload({ ...good, parallel: "4" }).payload).toMatchObject({ parallel: 4 });
    expect(runPayload({ ...good, parallel: "1" }).payload).not.toHaveProperty("parallel");
    for (const bad of ["0", "2.5", "65", "many"]) {
      expect(runPayload({ ...good, parallel: bad }).errors.parallel).toEqual(["Evaluations at once is a whole number from 1 to 64."]);
    }
  });
  it("wants the plan to be an object", () => {
    expect(runPayload({ ...good, plan: "[1]" }).errors.plan).toEqual(["The plan must be a JSON object."]);
  });
});

describe("fieldErrors", () => {
  const known = ["task", "source", "plan", "budget"];
  it("puts DRF's messages next to their fields and the rest at the top", () => {
    const body = { source: ["Kernel does not compile."], plan: { launches: ["kernel 'relu2' is not in the source"] },
      non_field_errors: ["Too many runs."], team: ["Not a member."] };
    expect(fieldErrors(body, known)).toEqual({
      fields: { source: ["Kernel does not compile."], plan: ["launches: kernel 'relu2' is not in the source"] },
      general: ["Too many runs.", "team: Not a member."] });
  });
  it("reads a bare detail or text body as a general error", () => {
    expect(fieldErrors({ detail: "Authentication credentials were not provided." }, known).general).toHaveLength(1);
    expect(fieldErrors("Bad Gateway", known)).toEqual({ fields: {}, general: ["Bad Gateway"] });
  });
});

describe("prefillFor", () => {
  it("fills an empty or untouched box with the task's naive kernel, and keeps what the person typed", () => {
    expect(prefillFor("", null, "naive B")).toBe("naive B");
    expect(prefillFor("naive A", "naive A", "naive B")).toBe("naive B");
    expect(prefillFor("my kernel", "naive A", "naive B")).toBe("my kernel");
  });
});

describe("runs list", () => {
  it("turns filters into a query and back", () => {
    expect(runsQuery({ task: "relu", status: "running", mine: true })).toBe("?task=relu&status=running&mine=1");
    expect(runsQuery({})).toBe("");
    expect(() => runsQuery({ status: "exploded" })).toThrow(/unknown run status/);
    expect(filtersFromQuery(new URLSearchParams("task=relu&status=bogus&mine=1"))).toEqual({ task: "relu", status: "", mine: true });
  });
  it("summarises runs", () => {
    const summary = runsSummary([{ status: "finished", speedup: 1.5, gpu_seconds: 10, evaluated: 30 },
      { status: "running", speedup: null, gpu_seconds: 2, evaluated: 3 }, { status: "finished", speedup: 2.5 }]);
    expect(summary).toEqual({ count: 3, byStatus: { finished: 2, running: 1 }, bestSpeedup: 2.5, gpuSeconds: 12, evaluations: 33 });
  });
  it("formats numbers for the tables", () => {
    expect([format.ms(0.8061), format.ms(12.5), format.ms(null)]).toEqual(["806.1 µs", "12.500 ms", "—"]);
    expect(format.speedup(2)).toBe("2.00×");
    expect(format.bytes(2048)).toBe("2.0 KiB");
    expect(format.rate(4.8e12, "B/s")).toBe("4.8 TB/s");
  });
});

describe("vendorSpeedup", () => {
  it("puts the best time over the vendor's, with the GPU the vendor was timed on", () => {
    expect(vendorSpeedup({ best_ms: 0.25, vendor_ms: 0.5059, vendor_gpu: "H200" })).toBe("2.02× (vendor on H200)");
    expect(vendorSpeedup({ best_ms: 1.0, vendor_ms: 0.5, vendor_gpu: null })).toBe("0.50×");
  });
  it("says where the vendor's time came from when the API does", () => {
    expect(vendorSpeedup({ best_ms: 0.25, vendor_ms: 0.5, vendor_gpu: "NVIDIA H100 80GB HBM3",
      vendor_source: "measured on this GPU (NVIDIA H100 80GB HBM3) on 2026-12-07" }))
      .toBe("2.00× (vendor measured on this GPU (NVIDIA H100 80GB HBM3) on 2026-12-07)");
    expect(vendorSpeedup({ best_ms: 0.25, vendor_ms: 0.5059, vendor_gpu: "H200", vendor_source: "recorded on the H200" }))
      .toBe("2.02× (vendor recorded on the H200)");
  });
  it("says nothing when either time is unknown", () => {
    expect(vendorSpeedup({ best_ms: 0.25, vendor_ms: null, vendor_gpu: null })).toBeNull();
    expect(vendorSpeedup({ best_ms: null, vendor_ms: 0.5, vendor_gpu: "H200" })).toBeNull();
    expect(vendorSpeedup({ best_ms: 0, vendor_ms: 0.5 })).toBeNull();
    expect(vendorSpeedup({})).toBeNull();
  });
});

describe("statusLabel", () => {
  it("says when a finished run found nothing, and marks imports", () => {
    expect(statusLabel({ status: "finished", outcome: "improved" })).toBe("finished");
    expect(statusLabel({ status: "finished", outcome: "nothing_passed" })).toBe("finished: nothing passed");
    expect(statusLabel({ status: "finished", outcome: "no_gain", imported: true })).toBe("finished: no gain (imported)");
    expect(statusLabel({ status: "running", outcome: "" })).toBe("running");
  });
  it("says a running run waits for a GPU worker while it is queued, and nothing of it once it stops", () => {
    expect(statusLabel({ status: "running", queued_since: "2026-12-07T19:00:00Z" })).toBe("queued for a GPU worker");
    expect(statusLabel({ status: "running", queued_since: null })).toBe("running");
    expect(statusLabel({ status: "stopped", queued_since: "2026-12-07T19:00:00Z" })).toBe("stopped");
  });
  it("reads the outcome from the best node as the server does", () => {
    expect(runOutcome({ status: "finished", best_node: null })).toBe("nothing_passed");
    expect(runOutcome({ status: "finished", best_node: 0 })).toBe("no_gain");
    expect(runOutcome({ status: "finished", best_node: 4 })).toBe("improved");
    expect(runOutcome({ status: "stopped", best_node: 4 })).toBe("");
  });
});

describe("writtenSummary", () => {
  it("names the writer, its helpers and the rounds before the kernel", () => {
    const text = writtenSummary({ writer: "qwen", experts: ["qwen", "hpc"], title: "relu", rationale: "one pass.",
      attempts: [{ round: 0, writer: "qwen", stage: "compile" }, { round: 1, writer: "qwen", stage: "compiled" }] });
    expect(text).toBe("Written by qwen with hpc: relu. one pass. Before it: round 0 by qwen stopped at compile. "
      + "Compiled; the run's first gate checks it. Review it before you start.");
  });

  it("reads a kernel written at once by one model", () => {
    expect(writtenSummary({ writer: "llm:m", experts: ["llm:m"], title: "t", rationale: "", attempts: [{ round: 0, stage: "compiled" }] }))
      .toBe("Written by llm:m: t. Compiled; the run's first gate checks it. Review it before you start.");
    expect(writtenSummary({ writer: "llm:m", title: "t", rationale: "",
      attempts: [{ round: 0, stage: "compile", message: "nvcc not found" }] }))
      .toBe("Written by llm:m: t. Not checked here: nvcc not found Review it before you start.");
  });
});

describe("progressLine", () => {
  const p = { evaluated: 90, budget: 100, pending: 2, nodes: 140 };
  it("counts against the budget while running, and says complete once ended", () => {
    expect(progressLine(p, { status: "running", waiting: 3 }))
      .toBe("90 / 100 evaluated · 2 pending · 140 nodes · 3 waiting for their parent");
    expect(progressLine(p, { status: "finished" })).toBe("90 evaluated · complete · 140 nodes");
    expect(progressLine(p, { status: "finished", imported: true })).toBe("90 evaluated · complete (imported) · 140 nodes");
    expect(progressLine(p, { status: "stopped", waiting: 3 })).toBe("90 evaluated · stopped · 140 nodes");
    expect(progressLine(p, { status: "running", perMinute: 12.345, minutesLeft: 0.8, underWay: 4 }))
      .toBe("90 / 100 evaluated · 2 pending · 140 nodes · 12.3 candidates/min · about under a minute left · 4 under way on GPU workers");
    expect(progressLine(p, { status: "running", perMinute: 0.1, minutesLeft: 100 })).toMatch(/about 1\.7 h left$/);
  });

  it("counts what GPU workers measure and what waits in the GPU queue, naming no worker or other run", () => {
    expect(progressLine(p, { status: "running", underWay: 3, measuring: 2, queued: 1, queuedAhead: 5 }))
      .toBe("90 / 100 evaluated · 2 pending · 140 nodes · 3 under way on GPU workers (2 being measured)"
        + " · 1 waiting for a GPU worker, 5 evaluation(s) of other runs ahead in the queue");
    expect(progressLine(p, { status: "running", underWay: 1, queued: 1 }))
      .toBe("90 / 100 evaluated · 2 pending · 140 nodes · 1 under way on GPU workers · 1 waiting for a GPU worker");
    expect(progressLine(p, { status: "finished", measuring: 1, queued: 2 })).toBe("90 evaluated · complete · 140 nodes");
  });
});

describe("vendorComparison", () => {
  it("gives the speed-up over the vendor where the run's GPU has a vendor time", () => {
    expect(vendorComparison({ best_ms: 0.25, vendor_ms: 0.5059, vendor_gpu: "H200", vendor_source: "recorded on the H200",
      measured_gpu: "NVIDIA H200" })).toBe("2.02× (vendor recorded on the H200)");
  });

  it("says which GPU has no vendor time, rather than nothing", () => {
    expect(vendorComparison({ best_ms: 0.25, vendor_ms: null, measured_gpu: "NVIDIA H100 80GB HBM3" }))
      .toBe("no vendor time on NVIDIA H100 80GB HBM3");
  });

  it("says nothing before anything was measured", () => {
    expect(vendorComparison({ best_ms: null, vendor_ms: null, measured_gpu: null })).toBeNull();
    expect(vendorComparison({})).toBeNull();
  });
});
