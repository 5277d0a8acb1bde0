import { describe, expect, it } from "vitest";
import { applyEvents, applyProgress, initialState, progress } from "../src/transforms/events.js";

const added = (seq, id, parent) => ({ seq, kind: "node_added", data: { id, parent, state: "pending", status: null, visits: 0 } });
const evaluated = (seq, id, parent, extra = {}) => ({ seq, kind: "node_evaluated", data: { id, parent, state: "done", status: "passed", time_ms: 1, visits: 1, evaluation: id + 1, ...extra } });

describe("applyEvents", () => {
  it("applies events in seq order and counts evaluations", () => {
    const start = initialState({ run: { budget: 4, status: "running", last_seq: 1 } });
    const { state, applied, gap } = applyEvents(start, [evaluated(3, 0, null), added(2, 0, null), added(4, 1, 0)]);
    expect(gap).toBeNull();
    expect(applied).toBe(3);
    expect(state.lastSeq).toBe(4);
    expect(state.rows.get(0)).toMatchObject({ state: "done", parentId: null });
    expect(state.rows.get(1)).toMatchObject({ state: "pending", parentId: 0 });
    expect(progress(state)).toMatchObject({ evaluated: 1, budget: 4, pending: 1, nodes: 2, fraction: 0.25 });
  });

  it("skips events it has seen (a replay after reconnecting) and leaves the state untouched", () => {
    const { state } = applyEvents(initialState(), [added(1, 0, null), evaluated(2, 0, null)]);
    const again = applyEvents(state, [added(1, 0, null), evaluated(2, 0, null)]);
    expect(again.applied).toBe(0);
    expect(again.state).toBe(state);
  });

  it("stops at a gap and says which seqs are missing", () => {
    const { state, applied, gap } = applyEvents(initialState(), [added(1, 0, null), added(4, 1, 0)]);
    expect(applied).toBe(1);
    expect(gap).toEqual({ after: 1, next: 4 });
    expect(state.rows.has(1)).toBe(false);
  });

  it("does not change the state it was given", () => {
    const start = initialState({ nodes: [{ id: 0, parentId: null, state: "pending" }] });
    applyEvents(start, [evaluated(1, 0, null)]);
    expect(start.rows.get(0)?.state).toBe("pending");
    expect(start.lastSeq).toBe(0);
  });

  it("follows run status, the best node and the finish", () => {
    const start = initialState({ run: { status: "running", root_ms: 0.8 } });
    const { state } = applyEvents(start, [
      { seq: 1, kind: "best_improved", data: { id: 3, time_ms: 0.4 } },
      { seq: 2, kind: "run_status", data: { status: "paused" } },
      { seq: 3, kind: "run_status", data: { status: "running" } },
      { seq: 4, kind: "run_finished", data: { evaluations: 8, best_id: 3, best_time_ms: 0.4 } },
      { seq: 5, kind: "something_new", data: {} },
    ]);
    expect(state.run).toMatchObject({ status: "finished", best_node: 3, best_ms: 0.4, speedup: 2, evaluated: 8 });
    expect(state.unknownKinds).toEqual(["something_new"]);
  });

  it("follows a run into the queue for a GPU worker and out of it, as its status events say", () => {
    const start = initialState({ run: { status: "running" } });
    const queued = applyEvents(start, [{ seq: 1, kind: "run_status",
      data: { status: "running", message: "queued for a GPU worker", queued_since: "2026-12-07T19:00:00Z" } }]).state;
    expect(queued.run).toMatchObject({ status: "running", message: "queued for a GPU worker",
      queued_since: "2026-12-07T19:00:00Z" });
    const left = applyEvents(queued, [{ seq: 2, kind: "run_status",
      data: { status: "running", message: "", queued_since: null } }]).state;
    expect(left.run).toMatchObject({ status: "running", message: "", queued_since: null });
    const paused = applyEvents(queued, [{ seq: 2, kind: "run_status", data: { status: "paused" } }]).state;
    expect(paused.run.queued_since).toBe("2026-12-07T19:00:00Z"); // an older server: the label reads the status
  });

  it("takes the root's time as the run's baseline once the root is measured", () => {
    const { state } = applyEvents(initialState({ run: { status: "running" } }), [
      evaluated(1, 0, null, { time_ms: 0.8 }),
      { seq: 2, kind: "best_improved", data: { id: 0, time_ms: 0.8 } },
      evaluated(3, 1, 0, { time_ms: 0.4 }),
      { seq: 4, kind: "best_improved", data: { id: 1, time_ms: 0.4 } },
    ]);
    expect(state.run).toMatchObject({ root_ms: 0.8, best_ms: 0.4, speedup: 2, best_node: 1 });
  });

  it("keeps a stopped run stopped when the finish arrives", () => {
    const { state } = applyEvents(initialState({ run: { status: "running" } }), [
      { seq: 1, kind: "run_status", data: { status: "stopped" } },
      { seq: 2, kind: "run_finished", data: {} },
    ]);
    expect(state.run.status).toBe("stopped");
  });
});

describe("applyProgress", () => {
  const queue = { pending: 1, evaluated: 2, budget: 6, per_minute: 4.5, minutes_left: 0.9, under_way: 1, queued: 0,
    queued_ahead: 0, measuring: 1 };

  it("takes the pushed GPU time and queue, and never counts evaluations back", () => {
    const start = initialState({ run: { status: "running", evaluated: 3, gpu_seconds: 0, queue: { per_minute: null } } });
    const next = applyProgress(start, { evaluated: 2, gpu_seconds: 12.5, queue });
    expect(next.run).toMatchObject({ status: "running", evaluated: 3, gpu_seconds: 12.5, queue });
    expect(next.run.queue).not.toBe(queue);
    expect(start.run.gpu_seconds).toBe(0); // a new state; the old one is untouched
  });

  it("takes the header's vendor comparison once the run's GPU is known", () => {
    const start = initialState({ run: { measured_gpu: null, vendor_ms: null } });
    const next = applyProgress(start, { measured_gpu: "NVIDIA H200", vendor_ms: 0.5, vendor_gpu: "H200",
      vendor_source: "recorded on the H200" });
    expect(next.run).toMatchObject({ measured_gpu: "NVIDIA H200", vendor_ms: 0.5, vendor_gpu: "H200" });
    expect(applyProgress(next, { evaluated: 1 }).run.vendor_ms).toBe(0.5); // absent keys stay
  });

  it("leaves the status to the events, whatever the frame holds", () => {
    const start = initialState({ run: { status: "running" } });
    expect(applyProgress(start, /** @type {any} */ ({ status: "finished", evaluated: 1 })).run.status).toBe("running");
  });

  it("refuses a frame without an object", () => {
    expect(() => applyProgress(initialState(), /** @type {any} */ (null))).toThrow(TypeError);
  });
});
