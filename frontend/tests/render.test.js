// @vitest-environment happy-dom
// Snapshot tests of rendered SVG and panels: the drawing code run into a DOM, its markup
// compared with the stored one (`npx vitest -u` to accept a deliberate change).
import { describe, expect, it, vi } from "vitest";
import { zoomIdentity } from "d3-zoom";
import { renderCurves, renderRoofline, renderTimeline, TimelineView } from "../src/views/charts.js";
import { diffBlock } from "../src/views/code.js";
import { renderInspector } from "../src/views/inspector.js";
import { TreeView } from "../src/views/tree.js";
import { rooflineModel } from "../src/transforms/roofline.js";
import { stratifyRows } from "../src/transforms/stratify.js";
import { bestSoFar } from "../src/transforms/timeline.js";
import { smallRun, syntheticRun } from "./fixtures.js";

/** The DOM mutations that `change` makes under `root`. */
async function mutationsOf(root, change) {
  /** @type {MutationRecord[]} */
  const records = [];
  const observer = new MutationObserver((batch) => records.push(...batch));
  observer.observe(root, { subtree: true, attributes: true, childList: true, characterData: true });
  change();
  await new Promise((resolve) => setTimeout(resolve, 0));
  observer.disconnect();
  return records;
}

/** The sum of the translate()s of an element's groups, up to the viewport. */
function offsetOf(el) {
  let x = 0, y = 0;
  for (let g = el.parentElement; g && !g.matches("g.viewport"); g = g.parentElement) {
    const m = /translate\((-?[\d.]+),(-?[\d.]+)\)/.exec(g.getAttribute("transform") ?? "");
    if (m) {
      x += Number(m[1]);
      y += Number(m[2]);
    }
  }
  return [x, y];
}

/** @returns {Element[]} */
function elementsAdded(records) {
  return records.filter((r) => r.type === "childList").flatMap((r) => [...r.addedNodes])
    .filter((n) => n.nodeType === 1).map((n) => /** @type {Element} */ (n));
}

function drawTree(rows, extra = {}) {
  const container = document.createElement("div");
  const onSelect = vi.fn();
  const onToggleFailed = vi.fn();
  const view = new TreeView(container, { width: 600, height: 300, zoom: false, onSelect, onToggleFailed });
  const byId = new Map(rows.map((r) => [r.id, r]));
  view.render({ root: stratifyRows(rows).root, rows: byId, run: {}, ...extra });
  return { container, view, byId, onSelect, onToggleFailed };
}

describe("TreeView", () => {
  it("draws the tree with the best path, folded failures and the selection", () => {
    const { container } = drawTree(smallRun(), { selectedId: 2 });
    expect(container.innerHTML).toMatchSnapshot();
  });

  it("highlights the path root → best and labels the best node", () => {
    const { container } = drawTree(smallRun());
    const onBest = [...container.querySelectorAll("g.node.on-best")].map((g) => g.getAttribute("data-id"));
    expect(onBest.sort()).toEqual(["0", "1", "5"]);
    expect(container.querySelector("g.node.best text")?.textContent).toBe("#5 450.0 µs");
    expect(container.querySelector("path.links.best")?.getAttribute("d")).toMatch(/^M0,/);
  });

  it("marks nodes only the screen measured, and says so in their tooltip", () => {
    const rows = smallRun().map((r) => (r.id === 2 ? { ...r, level: "screen" } : { ...r, level: "full" }));
    const { container } = drawTree(rows);
    const screened = [...container.querySelectorAll("g.node.screened")].map((g) => g.getAttribute("data-id"));
    expect(screened).toEqual(["2"]);
    expect(container.querySelector('g.node[data-id="2"] title')?.textContent).toContain("screened, not profiled");
    expect(container.querySelector('g.node[data-id="1"] title')?.textContent).not.toContain("screened");
  });

  it("keeps node elements by id across updates, adding and removing only what changed", () => {
    const rows = smallRun();
    const { container, view, byId } = drawTree(rows);
    const rootElement = container.querySelector('g.node[data-id="0"]');
    const grown = [...rows, { id: 7, parentId: 5, state: "pending", visits: 0 }];
    const grownById = new Map(grown.map((r) => [r.id, r]));
    view.render({ root: stratifyRows(grown).root, rows: grownById, run: {} });
    expect(container.querySelector('g.node[data-id="0"]')).toBe(rootElement);
    expect(container.querySelector('g.node[data-id="7"]')?.getAttribute("class")).toContain("pending");
    view.render({ root: stratifyRows(rows).root, rows: byId, run: {}, collapseFailed: false });
    expect(container.querySelector('g.node[data-id="7"]')).toBeNull();
    expect(container.querySelector('g.node[data-id="failed:0"]')).toBeNull();
    expect(container.querySelectorAll("g.node")).toHaveLength(7);
  });

  it("draws one more node of a 2,000-node tree with few writes, though the tidy layout shifted hundreds", async () => {
    const rows = syntheticRun(2000);
    const { container, view } = drawTree(rows, { collapseFailed: false });
    const records = await mutationsOf(container, () => {
      const grown = [...rows, { id: 2000, parentId: 77, state: "pending", visits: 0 }];
      view.render({ root: stratifyRows(grown).root, rows: new Map(grown.map((r) => [r.id, r])), run: {}, collapseFailed: false });
    });
    const addedNodes = elementsAdded(records).filter((el) => el.matches("g.node"));
    expect(addedNodes.map((el) => el.getAttribute("data-id"))).toEqual(["2000"]);
    // The layout moved 317 nodes (tests/stable.test.js); drawn one by one that is 634 writes.
    expect(records.length).toBeLessThan(317);
  });

  it("draws every node and link where the layout puts it, through growth and unfolding", () => {
    const rows = syntheticRun(1500);
    const { container, view } = drawTree(rows);
    const grown = [...rows, { id: 1500, parentId: 77, state: "pending", visits: 0 }, { id: 1501, parentId: 3, state: "pending", visits: 0 }];
    const byId = new Map(grown.map((r) => [r.id, r]));
    for (const collapseFailed of [true, false]) {
      const layout = view.render({ root: stratifyRows(grown).root, rows: byId, run: {}, collapseFailed });
      const drawn = new Map([...container.querySelectorAll("g.node")].map((g) => {
        const circle = /** @type {Element} */ (g.querySelector("circle"));
        const [x, y] = offsetOf(g);
        return [g.getAttribute("data-id"), [x + Number(circle.getAttribute("cx")), y + Number(circle.getAttribute("cy"))]];
      }));
      expect(drawn.size).toBe(layout.nodes.length);
      for (const d of layout.nodes) expect(drawn.get(d.id)?.map((v) => Math.round(v * 10) / 10)).toEqual([d.x, d.y]);
      const starts = [...container.querySelectorAll("g.links path")].flatMap((path) => {
        const [x, y] = offsetOf(path);
        return [...(path.getAttribute("d") ?? "").matchAll(/M(-?[\d.]+),(-?[\d.]+)/g)].map((m) => `${Math.round((x + Number(m[1])) * 10) / 10},${Math.round((y + Number(m[2])) * 10) / 10}`);
      });
      expect(starts.sort()).toEqual(layout.links.map((l) => `${l.source.x},${l.source.y}`).sort());
    }
  });

  it("repaints only the node an evaluation changed while the tree keeps its shape", async () => {
    const rows = syntheticRun(500);
    const { container, view, byId } = drawTree(rows);
    const root = stratifyRows(rows).root;
    view.render({ root, rows: byId, run: {} });
    const evaluated = new Map(byId).set(42, { ...byId.get(42), visits: 2, title: "re-measured" });
    const records = await mutationsOf(container, () => view.render({ root, rows: evaluated, run: {} }));
    const targets = new Set(records.map((r) => /** @type {Element} */ (r.target).closest("g.node")?.getAttribute("data-id")));
    expect([...targets]).toEqual(["42"]);
  });

  it("keeps labels readable zoomed out, hiding those that would overlap a more important one", () => {
    const container = document.createElement("div");
    const view = new TreeView(container, { width: 600, height: 300 });
    view.render({ root: stratifyRows(smallRun()).root, rows: new Map(smallRun().map((r) => [r.id, r])), run: {} });
    const svg = /** @type {SVGSVGElement} */ (container.querySelector("svg.tree"));
    const shown = () => [...container.querySelectorAll("text.label:not(.culled)")].map((t) => t.textContent).sort();

    view.svg.call(/** @type {any} */ (view.zoom).transform, zoomIdentity.scale(0.2));
    expect(svg.style.getPropertyValue("--label-scale")).toBe("5"); // 11 px on screen, not 2.2
    expect(shown()).toEqual(["#5 450.0 µs"]); // the best's; the root's and the stub's would overlap it

    view.svg.call(/** @type {any} */ (view.zoom).transform, zoomIdentity.scale(1));
    expect(svg.style.getPropertyValue("--label-scale")).toBe("1");
    expect(shown()).toEqual(["#0 800.0 µs", "#5 450.0 µs", "2 failed"]);
    expect(container.querySelector("g.viewport")?.getAttribute("transform")).toBe("translate(0,0) scale(1)");
  });

  it("labels the node under the pointer, and no longer once the pointer leaves", () => {
    const { container } = drawTree(smallRun());
    const node = /** @type {Element} */ (container.querySelector('g.node[data-id="2"] circle'));
    node.dispatchEvent(new MouseEvent("mouseover", { bubbles: true }));
    expect(container.querySelector('g.node[data-id="2"] text.label')?.textContent).toBe("#2 900.0 µs");
    node.dispatchEvent(new MouseEvent("mouseout", { bubbles: true }));
    expect(container.querySelector('g.node[data-id="2"] text.label')).toBeNull();
  });

  it("highlights and labels the nodes a search matched, and dims the others", () => {
    const { container, view, byId } = drawTree(smallRun(), { matches: new Set([1, 2]) });
    const classes = (id) => container.querySelector(`g.node[data-id="${id}"]`)?.getAttribute("class") ?? "";
    expect(container.querySelector("svg.tree")?.classList.contains("searching")).toBe(true);
    expect([classes(1), classes(2)].every((c) => c.split(" ").includes("match"))).toBe(true);
    expect([classes(0), classes(5)].every((c) => c.split(" ").includes("unmatched"))).toBe(true);
    expect(container.querySelector('g.node[data-id="1"] text.label')?.textContent).toBe("#1 500.0 µs");

    view.render({ root: stratifyRows(smallRun()).root, rows: byId, run: {}, matches: null });
    expect(container.querySelector("svg.tree")?.classList.contains("searching")).toBe(false);
    expect(container.querySelectorAll("g.node.match, g.node.unmatched")).toHaveLength(0);
  });

  it("marks a failed stub that hides matches, with their count, and dims one that hides none", () => {
    const { container, view, byId } = drawTree(smallRun(), { matches: new Set([1, 3, 4]) });
    const stub = () => /** @type {Element} */ (container.querySelector('g.node[data-id="failed:0"]'));
    expect(stub().classList.contains("holds-match")).toBe(true);
    expect(stub().classList.contains("unmatched")).toBe(false);
    expect(stub().querySelector("text.label")?.textContent).toBe("2 failed · 2 matches");

    view.render({ root: stratifyRows(smallRun()).root, rows: byId, run: {}, matches: new Set([1]) });
    expect(stub().classList.contains("holds-match")).toBe(false);
    expect(stub().classList.contains("unmatched")).toBe(true);
    expect(stub().querySelector("text.label")?.textContent).toBe("2 failed");
  });

  it("reports clicks: a node selects it, a failed stub unfolds its parent", () => {
    const { container, onSelect, onToggleFailed } = drawTree(smallRun());
    container.querySelector('g.node[data-id="2"]')?.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    container.querySelector('g.node[data-id="failed:0"]')?.dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(onSelect).toHaveBeenCalledWith(2);
    expect(onToggleFailed).toHaveBeenCalledWith(0);
  });
});

const RELU_ROOFLINE = { flops: 2 ** 28, bytes: 2 * 4 * 2 ** 28, time_ms: 0.5,
  ceilings: { dram_bytes_per_s: 4.8e12, fp32_flops_per_s: 6.7e13, source: "NVIDIA H200 datasheet" } };

describe("charts", () => {
  it("draws the best-so-far timeline", () => {
    const container = document.createElement("div");
    renderTimeline(container, bestSoFar(smallRun()), { width: 400, height: 160, budget: 8 });
    expect(container.innerHTML).toMatchSnapshot();
  });

  it("redraws in place: a new evaluation adds its point and rewrites no other", async () => {
    const rows = syntheticRun(300);
    const container = document.createElement("div");
    const timeline = new TimelineView(container, { width: 400, height: 160 });
    timeline.render(bestSoFar(rows), { budget: 1000 });
    const records = await mutationsOf(container, () => timeline.render(bestSoFar([...rows,
      { id: 300, parentId: 0, state: "done", status: "passed", time_ms: 0.9 }]), { budget: 1000 }));
    const added = elementsAdded(records);
    expect(added.map((el) => el.localName)).toEqual(["circle", "title"]);
    const rewritten = records.filter((r) => r.type === "attributes" && !added.includes(/** @type {Element} */ (r.target)));
    expect(rewritten.map((r) => /** @type {Element} */ (r.target).getAttribute("class"))).toEqual(["best-so-far"]); // its last step reaches the new point
    expect(container.querySelectorAll("svg.timeline")).toHaveLength(1);
  });

  it("draws the vendor's time and the physics floor, on a log scale an outlier cannot flatten", () => {
    const rows = [0.5, 0.45, 20, 0.4].map((t, id) => ({ id, parentId: id ? 0 : null, state: "done", status: "passed", time_ms: t }));
    const container = document.createElement("div");
    renderTimeline(container, bestSoFar(rows), { width: 400, height: 160, budget: 4, vendorMs: 0.2, floorMs: 0.1 });
    const labels = [...container.querySelectorAll("text.reference-label")].map((t) => t.textContent);
    expect(labels).toEqual([expect.stringMatching(/^vendor /), expect.stringMatching(/^physics floor /)]);
    const ys = [...container.querySelectorAll("g.points circle")].map((c) => Number(c.getAttribute("cy")));
    // 0.5 and 0.4 ms stay apart although a 20 ms point shares the axis (4 px, where a
    // linear axis over the same range would put them half a pixel apart)
    expect(Math.abs(ys[0] - ys[3])).toBeGreaterThan(3);
    expect(container.querySelector("g.axis.y .axis-label")?.textContent).toMatch(/log scale/);
  });

  it("says so when nothing is measured yet", () => {
    const container = document.createElement("div");
    renderTimeline(container, [], {});
    expect(container.textContent).toBe("No measured kernel yet");
  });

  it("draws the roofline with both ceilings and the kernel's point", () => {
    const container = document.createElement("div");
    renderRoofline(container, rooflineModel(RELU_ROOFLINE), { width: 420, height: 260 });
    expect(container.querySelectorAll("path.ceiling")).toHaveLength(2);
    expect(container.querySelector("circle.kernel-point title")?.textContent).toMatch(/memory roof/);
    expect(container.innerHTML).toMatchSnapshot();
  });

  it("draws a roof and a point for each level the node's counters measured", () => {
    const container = document.createElement("div");
    const measured = { achieved_flops_per_s: 4e11, levels: [
      { level: "L1", intensity: 0.125, ceiling_bytes_per_s: 1.338e14 },
      { level: "L2", intensity: 0.08, ceiling_bytes_per_s: 1.54e13 },
      { level: "DRAM", intensity: 0.125, ceiling_bytes_per_s: 4.81e12 }] };
    renderRoofline(container, rooflineModel({ ...RELU_ROOFLINE, measured }), { width: 420, height: 260 });
    expect(container.querySelectorAll("path.ceiling")).toHaveLength(5);
    expect([...container.querySelectorAll("g.level-point text")].map((t) => t.textContent)).toEqual(["L1", "L2", "DRAM"]);
    expect(container.querySelector("path.level-L2 title")?.textContent).toMatch(/^L2 15\.4 TB\/s/);
  });
});

const DETAIL = {
  id: 5, parentId: 1, title: "grid stride", source: "__global__ void relu() {\n}\n", rationale: "Fewer blocks, each doing more.",
  state: "done", status: "passed", time_ms: 0.45, spread_ms: 0.01, reward: 0.1, visits: 1, value: 0.1, prior: 0.4,
  diff: "--- a/k.cu\n+++ b/k.cu\n@@ -1,2 +1,2 @@\n-__global__ void relu() {\n+__global__ void __launch_bounds__(256) relu() {\n }\n",
  diff_vs_root: "", plan: { launches: [] }, measurement: { replayed: true },
  diagnosis: { bottleneck: "memory", summary: "DRAM bandwidth at 71% of peak", evidence: ["sol_dram 71%"], wants: ["wider loads"], source: "rules" },
  deltas_vs_parent: { time: 0.9, dram_bytes: 1.0, sol_dram: 1.12 }, deltas_vs_root: { time: 0.56 },
  reward_terms: { time: 0.08, sol_dram: 0.02 },
  compile: { ok: true, seconds: 0.72, cached: false, errors: [], log: "ptxas info    : Used 12 registers",
    kernels: [{ kernel: "relu", registers: 12, spill_store_bytes: 0, spill_load_bytes: 0, shared_static_bytes: 0, stack_frame_bytes: 0 }] },
  profile: { metrics: { sol_dram_pct: 71.2, dram_bytes: 2147483648 }, bottleneck: "memory", evidence: [] },
  correctness: [{ level: "L0", sizes: { n: 1 }, seed: 1, distribution: "normal", passed: true, guard: null, detail: "", max_abs_error: 0 },
    { level: "L1", sizes: { n: 268435456 }, seed: 2, distribution: "normal", passed: false, guard: "unwritten_output", detail: "12 outputs unwritten", max_abs_error: 1.5 }],
  timing: { median_ms: 0.45, p10_ms: 0.44, p90_ms: 0.46, min_ms: 0.44, max_ms: 0.47, runs: 30, spot_checks: 8,
    floor_ms: 0.447, floor_reason: "2.15 GB at 4.80 TB/s (NVIDIA H200 SXM datasheet peaks)" },
  references: "gpu (torch 2.11.0+cu130 on NVIDIA H200, in its own process; agreed with the host's at L1 {'n': 268435456})",
  inputs: "gpu: 5 L1 seed(s) drawn on the GPU by the harness's generator; their references: 5 from the input cache; L0 on the host",
  roofline: RELU_ROOFLINE, ncu_report_url: "/api/runs/1/nodes/5/ncu-rep/",
};

describe("renderInspector", () => {
  it("shows every section of a node", () => {
    const container = document.createElement("div");
    renderInspector(container, DETAIL, { row: { id: 5, parentId: 1, source: "rewrite:grid_stride" } });
    const sections = [...container.querySelectorAll("[data-section]")].map((s) => s.getAttribute("data-section"));
    expect(sections).toEqual(["proposal", "diagnosis", "code", "deltas", "reward", "correctness", "timing", "roofline", "profile", "compile", "ncu"]);
    expect(container.querySelector(".timing .references")?.textContent).toMatch(/^References of the verified runs: gpu \(torch /);
    expect(container.querySelector(".timing .floor-reason")?.textContent).toContain("4.80 TB/s");
    expect(container.querySelector(".timing")?.textContent).toContain("verified8");
    expect(container.querySelector("table.compile tbody")?.textContent).toContain("relu12");
    expect(container.querySelector(".proposer code")?.textContent).toBe("rewrite:grid_stride");
    expect(container.querySelector(".diff-add .text")?.textContent).toBe("__global__ void __launch_bounds__(256) relu() {");
    expect(container.querySelector(".diff-del .text")?.textContent).toBe("__global__ void relu() {");
    expect([...container.querySelectorAll("table.deltas tbody tr")].map((tr) => tr.textContent))
      .toEqual(["sol_dram—+12.0%", "Time (median)500.0 µs → 450.0 µs−10.0%", "dram_bytes2,147,483,648 → 2,147,483,648±0%"]);
    expect(container.querySelector("table.correctness .fail")?.textContent).toBe("failed (unwritten_output)");
    expect(container.querySelector(".correctness .inputs-drawn")?.textContent).toMatch(/^Inputs: gpu: 5 L1 seed\(s\) drawn on the GPU/);
    expect(container.querySelector('a[download]')?.getAttribute("href")).toBe("/api/runs/1/nodes/5/ncu-rep/");
    expect(container.querySelector(".inspector-header")?.textContent).toContain("450.0 µs ± 10.0 µs");
  });

  it("links a node a skill card made to the card's page, and no other node", () => {
    const made = document.createElement("div");
    renderInspector(made, { ...DETAIL, proposer: "skill:vec4-v1", skill_card_url: "/api/skills/vec4-v1/" });
    expect(made.querySelector("a.skill-card-link")?.getAttribute("href")).toBe("/skills/vec4-v1/");
    const other = document.createElement("div");
    renderInspector(other, { ...DETAIL, skill_card_url: null });
    expect(other.querySelector("a.skill-card-link")).toBeNull();
  });

  it("switches the code tab to the source and the deltas to the root", () => {
    const container = document.createElement("div");
    renderInspector(container, DETAIL);
    /** @type {HTMLElement} */ (container.querySelector('[data-tab="source"]')).click();
    expect(container.querySelector(".code-block .code")?.textContent).toBe("__global__ void relu() {\n}\n");
    const select = /** @type {HTMLSelectElement} */ (container.querySelector(".deltas select"));
    select.value = "root";
    select.dispatchEvent(new Event("change"));
    expect(container.querySelector("table.deltas tbody")?.textContent).toBe("Time (median)803.6 µs → 450.0 µs−44.0%");
  });

  it("explains what is missing for a pending node", () => {
    const container = document.createElement("div");
    renderInspector(container, { id: 6, parentId: 1, state: "pending", title: "BLOCK=512", source: "tunable" });
    expect(container.querySelector('[data-section="roofline"]')?.textContent).toContain("no profile");
    expect(container.querySelector('[data-section="correctness"]')?.textContent).toContain("No correctness checks ran");
  });
});

describe("diffBlock", () => {
  it("colours added and removed lines", () => {
    const block = diffBlock("@@ -1 +1 @@\n-a\n+b\n");
    expect([...block.querySelectorAll(".diff-line")].map((l) => l.className)).toEqual(["diff-line diff-hunk", "diff-line diff-del", "diff-line diff-add"]);
  });
});

describe("renderCurves", () => {
  it("draws one step line per run with its label, and says so when neither has a passing kernel", () => {
    const container = document.createElement("div");
    renderCurves(container, [{ label: "#1 relu", points: [{ x: 1, y: 0.8 }, { x: 2, y: 0.8 }, { x: 3, y: 0.5 }] },
      { label: "#2 relu", points: [{ x: 1, y: 0.8 }] }]);
    const curves = [...container.querySelectorAll("svg.curves g.curve")];
    expect(curves.map((g) => g.getAttribute("data-label"))).toEqual(["#1 relu", "#2 relu"]);
    expect(curves.map((g) => g.querySelector("text")?.textContent)).toEqual(["#1 relu", "#2 relu"]);
    // a step after each point: level to the next evaluation, then down to its time
    expect(curves[0].querySelector("path")?.getAttribute("d")).toMatch(/^M56,([\d.]+)L310,\1L310,\1L564,\1L564,([\d.]+)$/);
    renderCurves(container, [{ label: "#1 relu", points: [] }, { label: "#2 relu", points: [] }]);
    expect(container.querySelector("svg")).toBeNull();
    expect(container.textContent).toBe("Neither run has a kernel the full gate passed yet.");
  });
});
