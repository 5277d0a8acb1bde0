// @vitest-environment happy-dom
// The tree's first nodes drawn: the intent and the attempts before the search's root,
// their marks and labels, clicks, the legend, and an attempt in the inspector.
import { describe, expect, it, vi } from "vitest";
import { generationChain } from "../src/transforms/generation.js";
import { stratifyRows } from "../src/transforms/stratify.js";
import { renderAttemptInspector } from "../src/views/attemptInspector.js";
import { legend } from "../src/views/legend.js";
import { TreeView } from "../src/views/tree.js";
import { smallRun, WRITTEN } from "./fixtures.js";

const chain = /** @type {NonNullable<ReturnType<typeof generationChain>>} */ (generationChain(WRITTEN));

function drawTree(extra = {}) {
  const container = document.createElement("div");
  const onSelect = vi.fn(), onSelectAttempt = vi.fn();
  const view = new TreeView(container, { width: 600, height: 300, zoom: false, onSelect, onSelectAttempt });
  const rows = smallRun();
  view.render({ root: stratifyRows(rows).root, rows: new Map(rows.map((r) => [r.id, r])), run: {}, ...extra });
  return { container, view, onSelect, onSelectAttempt };
}

const at = (el) => [Number(el?.getAttribute("cx") ?? el?.getAttribute("x")), Number(el?.getAttribute("cy") ?? el?.getAttribute("y"))];

describe("the generation chain in the tree", () => {
  it("draws the intent and the failed attempts before the root, in the failed colour, with their stage", () => {
    const { container, view } = drawTree({ generation: chain });

    const nodes = [...container.querySelectorAll("g.generation-node")];
    expect(nodes.map((g) => [g.getAttribute("class"), g.getAttribute("data-stage"), g.querySelector("text")?.textContent])).toEqual([
      ["generation-node intent", null, "intent"],
      ["generation-node attempt failed", "compile", "#a1 qwen: compile failed"],
      ["generation-node attempt failed", "L0", "#a2 qwen: L0 failed"]]);
    expect(nodes[1].querySelector("circle")?.getAttribute("fill")).toBe("#d64545");
    const root = at(container.querySelector('g.node[data-id="0"] circle'));
    const xs = nodes.map((g) => at(g.querySelector("circle, rect"))[0]);
    expect(xs[0] < xs[1] && xs[1] < xs[2] && xs[2] < root[0]).toBe(true); // intent → a1 → a2 → root
    expect(at(nodes[2].querySelector("circle"))[1]).toBe(root[1]);
    expect(container.querySelector("path.generation-links")?.getAttribute("d")?.split("M")).toHaveLength(4);
    expect(view.extent?.x0).toBe(xs[0] + 7 / 2); // the fit takes the chain in, to the centre of the intent's 7 px square
    expect(container.innerHTML).toMatchSnapshot();
  });

  it("reports a click on an attempt or the intent, marks the selected one, and draws nothing without a generation", () => {
    const { container, view, onSelectAttempt, onSelect } = drawTree({ generation: chain, selectedAttempt: 1 });
    /** @type {SVGElement} */ (container.querySelector('g.generation-node[data-index="1"] circle')).dispatchEvent(new MouseEvent("click", { bubbles: true }));
    /** @type {SVGElement} */ (container.querySelector('g.generation-node[data-index="-1"] rect')).dispatchEvent(new MouseEvent("click", { bubbles: true }));
    expect(onSelectAttempt.mock.calls).toEqual([[1], [-1]]);
    expect(onSelect).not.toHaveBeenCalled();
    expect(container.querySelector("g.generation-node.selected")?.getAttribute("data-index")).toBe("1");

    const plain = drawTree();
    expect(plain.container.querySelector("g.generation")).toBeNull(); // drawn as before the chain existed
    expect(plain.view.extent?.x0).toBe(Math.min(...[...plain.container.querySelectorAll("g.node")].map((g) => /** @type {any} */ (g).__data__.x)));
    view.render({ root: stratifyRows(smallRun()).root, rows: new Map(smallRun().map((r) => [r.id, r])), run: {} });
    expect(container.querySelector("g.generation")?.childElementCount).toBe(0);
  });

  it("names the new marks in the legend only when there is a chain", () => {
    const withChain = legend({ generation: true }).textContent;
    expect(withChain).toContain("square: the intent");
    expect(withChain).toContain("#a: attempt, red if the gate stopped it");
    expect(legend().querySelector(".legend-item.intent")).toBeNull();
  });
});

describe("renderAttemptInspector", () => {
  it("shows an attempt: writer, contributors, round, stage, message, and its diff from the one before", () => {
    const container = document.createElement("div");
    renderAttemptInspector(container, chain, 1);
    expect(container.querySelector("h2")?.textContent).toBe("#a2 written from the intent");
    expect(container.querySelector("[data-stage]")?.textContent).toBe("L0 failed");
    expect(container.querySelector(".facts")?.textContent).toBe("writerqwencontributorsqwenround1 (a repair)stopped atL0");
    expect(container.querySelector(".attempt-message")?.textContent).toBe("max |error| 1.0 at L0");
    expect(container.querySelector(".diff-add .text")?.textContent).toBe("wrong");
    /** @type {HTMLElement} */ (container.querySelector('[data-tab="source"]')).click();
    expect(container.querySelector(".code-block .code")?.textContent).toContain("wrong");
  });

  it("shows the intent with every attempt, and the last attempt as the root's kernel", () => {
    const container = document.createElement("div");
    const onSelectAttempt = vi.fn(), onSelectRoot = vi.fn();
    renderAttemptInspector(container, chain, -1, { onSelectAttempt });
    expect(container.querySelector(".run-intent")?.textContent).toBe("relu over 2^28 floats");
    const buttons = [...container.querySelectorAll("table button")];
    expect(buttons.map((b) => b.textContent)).toEqual(["#a1 qwen: compile failed", "#a2 qwen: L0 failed", "#a3 hpc-coder: compiled"]);
    /** @type {HTMLElement} */ (buttons[2]).click();
    expect(onSelectAttempt).toHaveBeenCalledWith(2);

    renderAttemptInspector(container, chain, 2, { onSelectRoot });
    /** @type {HTMLElement} */ (container.querySelector(".notice button")).click();
    expect(onSelectRoot).toHaveBeenCalled();
    expect(() => renderAttemptInspector(container, chain, 5)).toThrow(RangeError);
    expect(container.querySelector('[data-section="edited"]')).toBeNull();
  });

  it("shows what was edited by hand in the last attempt's kernel before the run", () => {
    const edited = /** @type {NonNullable<ReturnType<typeof generationChain>>} */ (generationChain({ ...WRITTEN,
      edited: { diff: "--- as written\n+++ as the run started\n@@ -1 +1,2 @@\n x\n+// tuned by hand\n" } }));
    const container = document.createElement("div");
    renderAttemptInspector(container, edited, 2);
    expect(container.querySelector(".notice")?.textContent).toContain("Edited by hand before the search started");
    expect(container.querySelector('[data-section="edited"] .diff-add .text')?.textContent).toBe("// tuned by hand");
    renderAttemptInspector(container, edited, 1);
    expect(container.querySelector('[data-section="edited"]')).toBeNull();
  });
});
