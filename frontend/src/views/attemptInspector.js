// The inspector for the tree's first nodes: the intent (every attempt that wrote the
// first kernel) and one attempt (who wrote it, who helped, where the gate stopped it,
// what it said, its kernel and what its repair changed).
import { attemptLabel, isFailedAttempt, stageText } from "../transforms/generation.js";
import { codeBlock, diffBlock } from "./code.js";
import { facts, fill, h, table, tabbed } from "./dom.js";

/**
 * @param {HTMLElement} container
 * @param {import("../transforms/generation.js").GenerationChain} chain
 * @param {number} index the attempt's (-1: the intent)
 * @param {{onSelectAttempt?: (index: number) => void, onSelectRoot?: () => void}} [options]
 */
export function renderAttemptInspector(container, chain, index, { onSelectAttempt = () => {}, onSelectRoot = () => {} } = {}) {
  if (index === -1) return fill(container, intentView(chain, onSelectAttempt));
  const a = chain.attempts[index];
  if (!a) throw new RangeError(`no attempt #a${index + 1}: the generation has ${chain.attempts.length}`);
  const last = index === chain.attempts.length - 1;
  const failed = isFailedAttempt(a);
  return fill(container,
    h("header", { class: "inspector-header attempt-header", "data-attempt": index + 1 },
      h("h2", null, `#a${index + 1} `, h("span", { class: "node-title" }, "written from the intent")),
      h("p", null, h("span", { class: `badge status-${failed ? "failed" : "passed"}`, "data-stage": a.stage }, stageText(a.stage)),
        a.guard ? h("span", { class: "badge guard" }, `guard: ${a.guard}`) : null),
      facts([["writer", h("code", null, a.writer)], ["contributors", a.experts.length ? a.experts.join(", ") : null],
        ["round", a.round === 0 ? "0 (the first kernel)" : `${a.round} (a repair)`], ["stopped at", a.stage]]),
      last ? h("p", { class: "notice" }, chain.editedDiff != null
        ? "Edited by hand before the search started from it (below): "
        : "The search started from this kernel: ",
      h("button", { type: "button", class: "link", onclick: onSelectRoot }, "the root node")) : null),
    section("The gate said", a.message ? h("pre", { class: "plan attempt-message" }, a.message)
      : h("p", { class: "muted" }, "Nothing."), "gate-said"),
    kernelSection(a, index),
    last && chain.editedDiff != null
      ? section("Edited before the run", chain.editedDiff ? diffBlock(chain.editedDiff)
        : h("p", { class: "muted" }, "Only whitespace changed."), "edited")
      : null);
}

function intentView(chain, onSelectAttempt) {
  return [
    h("header", { class: "inspector-header attempt-header", "data-attempt": "intent" },
      h("h2", null, "The intent"), h("p", { class: "run-intent" }, chain.intent || "(none given)"),
      chain.experts.length ? h("p", null, "Contributors: ", h("code", null, chain.experts.join(", "))) : null),
    section("Attempts", table(["attempt", "round", "writer", "ended at", "the gate said"], chain.attempts.map((a, i) => [
      h("button", { type: "button", class: "link", onclick: () => onSelectAttempt(i) }, attemptLabel(a, i)),
      String(a.round), a.writer, a.stage, a.message ? a.message.split("\n")[0] : "—"])), "generation"),
  ];
}

function kernelSection(a, index) {
  if (!a.source) return section("Kernel", h("p", { class: "muted" }, "This attempt's kernel was not kept."), "code");
  /** @type {Array<[string, string, () => Node|string]>} */
  const tabs = [["source", "Source", () => codeBlock(/** @type {string} */ (a.source))],
    ["diff", "Diff vs the attempt before", () => (a.diff ? diffBlock(a.diff)
      : h("p", { class: "muted" }, index === 0 ? "The first attempt: nothing before it." : "No change kept."))]];
  return section("Kernel", tabbed(tabs, a.diff ? "diff" : "source"), "code");
}

function section(title, body, name) {
  return h("section", { class: `inspector-section ${name}`, "data-section": name }, h("h3", null, title), body);
}
