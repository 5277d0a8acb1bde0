import { describe, expect, it } from "vitest";
import { deltaBars, formatPercent, metricDeltas } from "../src/transforms/deltas.js";
import { rooflineModel, RooflineError } from "../src/transforms/roofline.js";
import { bestSoFar, compareCurves } from "../src/transforms/timeline.js";
import { smallRun } from "./fixtures.js";

describe("metricDeltas", () => {
  it("turns ratios into percent change, the biggest move first, halving and doubling alike", () => {
    const deltas = metricDeltas({ time: 0.5, dram_bytes: 1.1, sol_dram: 2, registers: 1 });
    expect(deltas.map((d) => d.metric)).toEqual(["sol_dram", "time", "dram_bytes", "registers"]);
    expect(deltas[1].percent).toBeCloseTo(-50);
    expect(deltas[2].percent).toBeCloseTo(10);
  });
  it("puts unusable ratios last with no percent", () => {
    const deltas = metricDeltas({ a: 0, b: 1.5, c: /** @type {any} */ (null) });
    expect(deltas.map((d) => [d.metric, d.percent])).toEqual([["b", 50], ["a", null], ["c", null]]);
  });
  it("formats percent for people", () => {
    expect([12.34, -45, 0.01, null].map(formatPercent)).toEqual(["+12.3%", "−45.0%", "±0%", "—"]);
  });
  it("scales bars to the largest change, clamped at the cap", () => {
    const bars = deltaBars(metricDeltas({ a: 0.5, b: 1.25, c: 40 }), { capPercent: 100 });
    expect(bars.map((b) => [b.metric, b.direction, Math.round(b.length), b.clipped])).toEqual([
      ["c", "up", 100, true], ["a", "down", 50, false], ["b", "up", 25, false]]);
  });
});

describe("rooflineModel", () => {
  // H200: 4.8 TB/s HBM3e, 67 TFLOP/s FP32 (NVIDIA H200 datasheet); a relu over 2^28 floats.
  const relu = { flops: 2 ** 28, bytes: 2 * 4 * 2 ** 28, time_ms: 0.5,
    ceilings: { dram_bytes_per_s: 4.8e12, fp32_flops_per_s: 6.7e13, source: "datasheet" } };
  it("places a memory-bound kernel left of the ridge, under the DRAM roof", () => {
    const model = rooflineModel(relu);
    expect(model.point.x).toBeCloseTo(0.125);
    expect(model.point.y).toBeCloseTo(2 ** 28 / 5e-4);
    expect(model.bound).toBe("memory");
    expect(model.ridge).toBeCloseTo(6.7e13 / 4.8e12);
    expect(model.attainable).toBeCloseTo(4.8e12 * 0.125);
    expect(model.efficiency).toBeGreaterThan(0.8);
    expect(model.efficiency).toBeLessThan(1);
    expect(model.xDomain[0]).toBeLessThan(model.point.x);
    expect(model.xDomain[1]).toBeGreaterThan(model.ridge);
    expect(model.roof[1]).toEqual({ x: model.ridge, y: 6.7e13 });
  });
  it("says what is missing instead of drawing nonsense", () => {
    expect(() => rooflineModel({ ...relu, ceilings: {} })).toThrow(RooflineError);
    expect(() => rooflineModel({ ceilings: relu.ceilings })).toThrow(/missing/);
  });
  // The hierarchical roofline's ceilings as the H200's ncu read them (bench/results/
  // 2026-12-03-h200-ncu-roofline.json): L1 133.8 TB/s, L2 15.4 TB/s, DRAM 4.81 TB/s.
  const measured = { achieved_flops_per_s: 1e12, fp32_flops_per_s: 6.69e13, levels: [
    { level: "L1", intensity: 0.5, ceiling_bytes_per_s: 1.338e14 },
    { level: "L2", intensity: 0.2, ceiling_bytes_per_s: 1.54e13 },
    { level: "DRAM", intensity: 0.25, ceiling_bytes_per_s: 4.81e12 },
    { level: "nothing moved", intensity: null, ceiling_bytes_per_s: 1e12 }] };
  it("places each measured level at its own intensity under its own roof", () => {
    const model = rooflineModel({ ...relu, measured });
    expect(model.levels.map((l) => l.level)).toEqual(["L1", "L2", "DRAM"]);
    expect(model.levels.map((l) => l.x)).toEqual([0.5, 0.2, 0.25]);
    expect(model.levels.every((l) => l.y === 1e12)).toBe(true);
    expect(model.levels[0].ridge).toBeCloseTo(6.7e13 / 1.338e14);
    for (const l of model.levels) expect(model.xDomain[0]).toBeLessThan(Math.min(l.x, l.ridge));
  });
  it("draws no level without a profile that counted them", () => {
    expect(rooflineModel(relu).levels).toEqual([]);
    expect(rooflineModel({ ...relu, measured: null }).levels).toEqual([]);
    expect(rooflineModel({ ...relu, measured: { ...measured, achieved_flops_per_s: 0 } }).levels).toEqual([]);
  });
});

describe("bestSoFar", () => {
  it("tracks the best passing time over evaluations, skipping pending and reused nodes", () => {
    const rows = [...smallRun(), { id: 7, parentId: 0, state: "done", status: "passed", time_ms: 0.1, reused: true }];
    const points = bestSoFar(rows);
    expect(points.map((p) => [p.id, p.best_ms, p.improved])).toEqual([
      [0, 0.8, true], [1, 0.5, true], [2, 0.5, false], [3, 0.5, false], [4, 0.5, false], [5, 0.45, true]]);
    expect(points[3]).toMatchObject({ passed: false, time_ms: null, index: 4 });
  });
  it("orders by the server's evaluation index when there is one", () => {
    const rows = [
      { id: 0, parentId: null, state: "done", status: "passed", time_ms: 1, evaluation: 1 },
      { id: 2, parentId: 0, state: "done", status: "passed", time_ms: 0.5, evaluation: 2 },
      { id: 1, parentId: 0, state: "done", status: "passed", time_ms: 0.7, evaluation: 3 },
    ];
    expect(bestSoFar(rows).map((p) => [p.id, p.best_ms])).toEqual([[0, 1], [2, 0.5], [1, 0.5]]);
  });
});

describe("compareCurves", () => {
  it("turns each run's best after each evaluation into points, leaving out the evaluations before a pass", () => {
    expect(compareCurves([{ id: 3, task: "relu", best_so_far: [null, 0.9, 0.9, 0.5] }, { id: 4, task: "relu" }])).toEqual([
      { label: "#3 relu", points: [{ x: 2, y: 0.9 }, { x: 3, y: 0.9 }, { x: 4, y: 0.5 }] },
      { label: "#4 relu", points: [] }]);
  });
});

describe("a roofline without ceilings", () => {
  it("says which GPU the datasheet table does not know", () => {
    expect(() => rooflineModel({ flops: 1, bytes: 1, time_ms: 1, ceilings: null, gpu: "NVIDIA L40S" }))
      .toThrow(new RooflineError("no datasheet ceilings for NVIDIA L40S, so no roofline"));
  });
});
