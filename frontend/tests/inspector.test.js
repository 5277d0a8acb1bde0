import { describe, expect, it } from "vitest";
import { compileModel, deltaValues, formatMetric, inspectorModel, metricName, profileSections, timingModel } from "../src/transforms/inspector.js";

describe("inspectorModel", () => {
  it("reads the kernel's code and its proposer apart, as the API sends them", () => {
    const m = inspectorModel({ id: 3, parentId: 0, source: "__global__ void k() {\n}\n", proposer: "rewrite:unroll" });
    expect(m.code).toBe("__global__ void k() {\n}\n");
    expect(m.proposer).toBe("rewrite:unroll");
  });

  it("takes the proposer from the tree's row when the detail only has the code", () => {
    const m = inspectorModel({ id: 3, source: "int x;\n" }, { id: 3, parentId: 0, source: "tunable" });
    expect(m).toMatchObject({ code: "int x;\n", proposer: "tunable", parentId: 0 });
  });

  it("says why there is no roofline instead of drawing one", () => {
    expect(inspectorModel({ id: 1 }).rooflineProblem).toBe("no profile for this node");
    const missing = inspectorModel({ id: 1, roofline: { flops: null, bytes: 8, time_ms: 1,
      ceilings: { dram_bytes_per_s: 4.25e12, fp32_flops_per_s: 50.7e12 } } });
    expect(missing.roofline).toBeNull();
    expect(missing.rooflineProblem).toMatch(/missing/);
  });

  it("says whether only the screen measured the node, or what the screen saw before the full gate", () => {
    expect(inspectorModel({ id: 4, level: "screen", measurement: { level: "screen" } }))
      .toMatchObject({ level: "screen", promotedFromScreen: null });
    expect(inspectorModel({ id: 5, level: "full", promoted_from_screen: { time_ms: 0.5, seconds: 0.06 } }))
      .toMatchObject({ level: "full", promotedFromScreen: { time_ms: 0.5 } });
    expect(inspectorModel({ id: 6 }, { id: 6, level: "screen" }).level).toBe("screen");
  });

  it("keeps the server's words on why a screened node faster than the best is not the best", () => {
    const note = "Screened only: 1% faster than the best full-gate time (0.5074 ms), not the more than 2% ...";
    expect(inspectorModel({ id: 2, level: "screen", screen_note: note }).screenNote).toBe(note);
    expect(inspectorModel({ id: 2, level: "screen", screen_note: null }).screenNote).toBeNull();
    expect(inspectorModel({ id: 2, level: "full" }).screenNote).toBeNull();
  });

  it("says where the correctness checks' inputs were drawn, when the verdict says", () => {
    expect(inspectorModel({ id: 1, inputs: "gpu: 5 L1 seed(s) drawn on the GPU" }).inputsDrawn).toBe("gpu: 5 L1 seed(s) drawn on the GPU");
    expect(inspectorModel({ id: 1, inputs: "" }).inputsDrawn).toBeNull();
    expect(inspectorModel({ id: 1 }).inputsDrawn).toBeNull();
  });

  it("sorts reward terms by size and turns deltas into percent", () => {
    const m = inspectorModel({ id: 1, reward_terms: { a: 0.01, b: -0.3 }, deltas_vs_parent: { time: 0.8 } });
    expect(m.rewardTerms.map(([k]) => k)).toEqual(["b", "a"]);
    expect(m.deltasVsParent[0].percent).toBeCloseTo(-20);
  });
});

describe("compileModel", () => {
  it("takes the gate's compile record or a bare list of kernels", () => {
    const kernel = { kernel: "relu", registers: 10 };
    expect(compileModel({ ok: false, errors: ["line 3: expected ';'"], kernels: [], log: "", seconds: 0.2 }))
      .toMatchObject({ ok: false, errors: ["line 3: expected ';'"], kernels: [] });
    expect(compileModel([kernel])).toMatchObject({ ok: null, kernels: [kernel] });
    expect(compileModel(null)).toBeNull();
  });
});

describe("a root written from an intent", () => {
  it("keeps its generation apart from the other params", () => {
    const m = inspectorModel({ id: 0, params: { intent: "relu", experts: ["qwen", "hpc"], rounds: 1,
      attempts: [{ round: 0, writer: "qwen", stage: "compile", message: "line 3: expected a \";\"" },
        { round: 1, writer: "qwen", stage: "compiled", message: "" }] } });
    expect(m.params).toEqual({ intent: "relu", rounds: 1 });
    expect(m.generation?.experts).toEqual(["qwen", "hpc"]);
    expect(m.generation?.attempts.map((a) => a.stage)).toEqual(["compile", "compiled"]);
  });

  it("has no generation when nobody wrote it", () => {
    expect(inspectorModel({ id: 0, params: { rank: 1 } })).toMatchObject({ params: { rank: 1 }, generation: null });
  });
});

describe("profileSections", () => {
  it("groups the metrics like Nsight Compute's sections, and keeps the rest", () => {
    const sections = profileSections({ sol_sm_pct: 12.5, sol_dram_pct: 91, dram_read_bytes: 1.07e9, achieved_occupancy_pct: 80,
      grid_size: 1056, block_size: 256, new_metric: 3, bottleneck_note: "text is not a metric" });
    expect(sections.map((s) => s.title)).toEqual(["GPU Speed Of Light Throughput", "Memory Workload Analysis", "Occupancy",
      "Launch Statistics", "Other"]);
    expect(sections[0].rows.map((r) => [r.label, r.unit])).toEqual([["Compute (SM) throughput", "%"], ["DRAM throughput", "%"]]);
    expect(sections[4].rows).toEqual([{ key: "new_metric", label: "new_metric", value: 3, unit: "" }]);
  });

  it("has nothing to show without metrics", () => {
    expect(profileSections(null)).toEqual([]);
    expect(profileSections({ x: "y" })).toEqual([]);
  });
});

describe("timingModel", () => {
  it("tells the timed runs, the floor and where the verified runs' references came from", () => {
    const t = timingModel({ median_ms: 1.93, p10_ms: 1.9, p90_ms: 1.97, min_ms: 1.88, max_ms: 2.1, runs: 30,
      spot_checks: 8, floor_ms: 0.42, floor_reason: "0.137 TFLOP at 329.8 TFLOP/s" }, "gpu (torch 2.11.0 on NVIDIA H200)");
    expect(t).toMatchObject({ medianMs: 1.93, runs: 30, spotChecks: 8, floorMs: 0.42,
      references: "gpu (torch 2.11.0 on NVIDIA H200)" });
  });

  it("says the host when the verdict names no other place, and has nothing for an untimed node", () => {
    expect(timingModel({ median_ms: 1, runs: 30 }, "")?.references).toBe("host");
    expect(timingModel({ median_ms: 1, runs: 30 }, undefined)?.references).toBe("host");
    expect(timingModel(null, "gpu")).toBeNull();
    expect(timingModel({ runs: 0 }, "gpu")).toBeNull();
    expect(inspectorModel({ id: 1 }).timing).toBeNull();
  });
});

describe("metrics as people read them", () => {
  it("names a metric with its unit and keeps an unknown id", () => {
    expect(metricName("sol_dram_pct")).toEqual({ key: "sol_dram_pct", label: "DRAM throughput", unit: "%" });
    expect(metricName("smsp__cycles_active.avg")).toEqual({ key: "smsp__cycles_active.avg", label: "smsp__cycles_active.avg", unit: "" });
  });

  it("scales durations, bytes and counts instead of exponents", () => {
    expect(formatMetric(4.99e5, "ns")).toBe("499.0 µs");
    expect(formatMetric(2.5e6, "ns")).toBe("2.500 ms");
    expect(formatMetric(812, "ns")).toBe("812 ns");
    expect(formatMetric(3 * 1024 ** 3, "B")).toBe("3.0 GiB");
    expect(formatMetric(512, "B")).toBe("512 B");
    expect(formatMetric(67.04, "%")).toBe("67.0 %");
    expect(formatMetric(1048576, "")).toBe("1,048,576");
    expect(formatMetric(0.123456, "")).toBe("0.1235");
    expect(formatMetric(null, "ns")).toBe("—");
  });

  it("works out a delta's before from this node's value and the ratio", () => {
    expect(deltaValues({ metric: "duration_ns", ratio: 0.5 }, { duration_ns: 1000 })).toEqual({ before: 2000, after: 1000 });
    expect(deltaValues({ metric: "duration_ns", ratio: null }, { duration_ns: 1000 })).toEqual({ before: null, after: null });
    expect(deltaValues({ metric: "time", ratio: 0.5 }, { duration_ns: 1000 })).toEqual({ before: null, after: null });
    expect(deltaValues({ metric: "duration_ns", ratio: 2 }, null)).toEqual({ before: null, after: null });
  });
});
