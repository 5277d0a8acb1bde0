// @vitest-environment happy-dom
// A timing check that only logs: how long a 5,000-node tree takes to stratify, lay out
// and draw, to redraw after one more node, and to repaint that node once it is evaluated
// (the same shape: no layout), so a slowdown shows in the test output.
// happy-dom is slower than a browser's DOM; the numbers are an upper bound.
import { describe, expect, it } from "vitest";
import { layoutTree } from "../src/transforms/layout.js";
import { stratifyRows } from "../src/transforms/stratify.js";
import { applyEvents, initialState } from "../src/transforms/events.js";
import { TreeView } from "../src/views/tree.js";
import { syntheticRun } from "./fixtures.js";

const time = (fn) => {
  const start = performance.now();
  const value = fn();
  return [value, performance.now() - start];
};

describe("a 5,000-node tree", () => {
  it("stratifies, lays out and draws, then redraws incrementally", () => {
    const rows = syntheticRun(5000);
    const [applied, applyMs] = time(() => applyEvents(initialState(), rows.map((row, i) => ({ seq: i + 1, kind: "node_evaluated", data: row }))).state);
    let state = applied;
    const [{ root }, stratifyMs] = time(() => stratifyRows(state.rows.values()));
    const [layout, layoutMs] = time(() => layoutTree(root, { collapseFailed: false }));
    const container = document.createElement("div");
    const view = new TreeView(container, { zoom: false });
    const [, firstDrawMs] = time(() => view.render({ root, rows: state.rows, collapseFailed: false }));
    state = applyEvents(state, [{ seq: 5001, kind: "node_added", data: { id: 5000, parentId: 10, state: "pending" } }]).state;
    const grown = stratifyRows(state.rows.values()).root;
    const [, redrawMs] = time(() => view.render({ root: grown, rows: state.rows, collapseFailed: false }));
    state = applyEvents(state, [{ seq: 5002, kind: "node_evaluated", data: { id: 5000, parentId: 10, state: "done", status: "passed", time_ms: 0.5 } }]).state;
    const [, repaintMs] = time(() => view.render({ root: grown, rows: state.rows, collapseFailed: false }));
    console.log(`5,000 nodes: apply ${applyMs.toFixed(1)} ms, stratify ${stratifyMs.toFixed(1)} ms, layout ${layoutMs.toFixed(1)} ms, ` +
      `first draw ${firstDrawMs.toFixed(1)} ms, redraw after one node ${redrawMs.toFixed(1)} ms, ` +
      `after its evaluation (same shape) ${repaintMs.toFixed(1)} ms (happy-dom)`);
    expect(layout.nodes).toHaveLength(5000);
    expect(container.querySelectorAll("g.node")).toHaveLength(5001);
    expect(container.querySelector('g.node[data-id="5000"]')?.getAttribute("class")).toBe("node passed");
  }, 60_000);
});
