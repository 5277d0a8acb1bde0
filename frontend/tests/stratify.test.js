import { describe, expect, it } from "vitest";
import { normalizeRow, mergeRow, rowChanges } from "../src/transforms/rows.js";
import { stratifyRows, StratifyError } from "../src/transforms/stratify.js";
import { smallRun } from "./fixtures.js";

describe("stratifyRows", () => {
  it("builds the hierarchy from flat id/parentId rows", () => {
    const { root, waiting } = stratifyRows(smallRun());
    expect(waiting).toEqual([]);
    expect(root?.data.id).toBe(0);
    expect(root?.children?.map((c) => c.data.id)).toEqual([1, 2, 3, 4]);
    expect(root?.descendants()).toHaveLength(7);
  });

  it("keeps a node whose parent has not arrived waiting, and joins it when the parent comes", () => {
    const rows = smallRun().filter((r) => r.id !== 1);
    const first = stratifyRows(rows);
    expect(first.waiting.map((r) => r.id).sort()).toEqual([5, 6]);
    expect(first.root?.descendants()).toHaveLength(4);
    const second = stratifyRows(smallRun());
    expect(second.waiting).toEqual([]);
    expect(second.root?.find((n) => n.data.id === 5)?.parent?.data.id).toBe(1);
  });

  it("waits for everything until the root arrives", () => {
    const { root, waiting } = stratifyRows(smallRun().slice(1));
    expect(root).toBeNull();
    expect(waiting).toHaveLength(6);
  });

  it("refuses two roots", () => {
    expect(() => stratifyRows([{ id: 1, parentId: null }, { id: 2, parentId: null }])).toThrow(StratifyError);
  });
});

describe("normalizeRow and mergeRow", () => {
  it("reads the engine's `parent` as parentId", () => {
    expect(normalizeRow({ id: 3, parent: 1 })).toEqual({ id: 3, parentId: 1 });
    expect(normalizeRow({ id: 0, parent: null }).parentId).toBeNull();
    expect(() => normalizeRow({ parentId: 1 })).toThrow(/integer id/);
  });

  it("never takes a done node back to pending, nor its visits down", () => {
    const done = { id: 5, parentId: 1, state: "done", status: "passed", time_ms: 0.4, reward: 0.2, visits: 4, value: 0.3 };
    const stale = { id: 5, parentId: 1, state: "pending", status: null, time_ms: null, reward: null, visits: 0, value: 0, title: "t" };
    const merged = mergeRow(done, stale);
    expect(merged).toMatchObject({ state: "done", status: "passed", time_ms: 0.4, visits: 4, value: 0.3, title: "t" });
    expect(mergeRow(done, { ...done, visits: 6, value: 0.5 })).toMatchObject({ visits: 6, value: 0.5 });
  });
});

describe("rowChanges", () => {
  const rows = () => new Map(smallRun().map((r) => [r.id, r]));
  const withRow = (map, row) => new Map(map).set(row.id, row);

  it("tells a new node apart from an evaluation that passed", () => {
    const before = rows();
    expect(rowChanges(before, withRow(before, { id: 7, parentId: 1, state: "pending" }))).toEqual({ shape: true, measured: false });
    const passed = { ...before.get(6), state: "done", status: "passed", time_ms: 0.7 };
    expect(rowChanges(before, withRow(before, passed))).toEqual({ shape: false, measured: true });
  });

  it("counts a node that failed as a change of shape: failed subtrees fold", () => {
    const before = rows();
    const failed = { ...before.get(6), state: "done", status: "rejected" };
    expect(rowChanges(before, withRow(before, failed))).toEqual({ shape: true, measured: true });
  });

  it("sees nothing when nothing was replaced, and everything the first time", () => {
    const before = rows();
    expect(rowChanges(before, new Map(before))).toEqual({ shape: false, measured: false });
    expect(rowChanges(null, before)).toEqual({ shape: true, measured: true });
  });
});
