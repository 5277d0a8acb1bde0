// The legends of the session page: what each mark of the tree and of the best-time chart means.
import { h } from "./dom.js";

/**
 * What each mark of the tree means; `generation`: the run's root was written from an
 * intent, so the tree begins with the intent and the attempts (views/treeChain.js).
 */
export function legend({ generation = false } = {}) {
  const items = [["passed, faster", "better"], ["passed, slower", "worse"], ["failed", "failed"], ["not measured", "unmeasured"], ["pending", "pending"]];
  return h("span", { class: "legend" }, items.map(([label, cls]) => h("span", { class: `legend-item ${cls}` }, h("i"), label)),
    h("span", { class: "legend-item screened", title: "measured by the screen only (fewer seeds and timed runs, no profile): never a run's best" },
      h("i"), "hollow: screened only"),
    h("span", { class: "legend-item best-path" }, h("i"), "best path"),
    h("span", { class: "legend-item stub", title: "failed children folded into one node: click it to show them" },
      h("i"), "dashed: failed, folded"),
    h("span", { class: "legend-item folded", title: "a node whose subtree you collapsed: click it to open it" },
      h("i"), "dark ring: collapsed"),
    h("span", { class: "legend-item match", title: "matches the node table's search (the rest is dimmed); a fold that hides matches is ringed too, and its label counts them" },
      h("i"), "blue ring: search match"),
    generation ? [h("span", { class: "legend-item intent", title: "the intent the first kernel was written from: click it for every attempt" },
      h("i"), "square: the intent"),
    h("span", { class: "legend-item attempt-failed", title: "an attempt to write the first kernel that the gate stopped (policy, compile, L0): click it for what it said" },
      h("i"), "#a: attempt, red if the gate stopped it")] : null);
}

/** What each mark of the best-time chart means. */
export function timelineLegend() {
  const item = (cls, text, dot = false) => [h("span", { class: `swatch ${dot ? "dot " : ""}${cls}` }), text];
  return h("p", { class: "timeline-legend" },
    item("measured", "measured", true), item("improved", "a new best", true),
    item("best", "best so far"), item("vendor", "vendor library"), item("floor", "physics floor (the measuring GPU's datasheet)"));
}

