// A lineage's page (/lineages/<id>/): the walk of an expert kernel drawn with the search
// tree's view. States are nodes (time, status), each under the state a forward step
// reached it from; rejected attempts hang, failed, under where they started; the path
// from the plain attempt to the expert is the highlighted best path. A node selected
// shows the step into it: its diff and its metric deltas.
import { api } from "../api.js";
import { stratifyRows } from "../transforms/stratify.js";
import { diffBlock } from "./code.js";
import { facts, fill, h, table } from "./dom.js";
import { TreeView } from "./tree.js";
import { shareText } from "./treeNodes.js";

/** A difference with its sign, to four significant digits: "+1.234e+6", "-12.5". */
function signed(/** @type {number} */ value) {
  if (!Number.isFinite(value)) return "—";
  return `${value > 0 ? "+" : ""}${Number(value.toPrecision(4))}`;
}

/** @param {HTMLElement} root @param {number} lineageId */
export async function mountLineage(root, lineageId) {
  const graph = await api(`/api/lineages/${lineageId}/`);
  const rows = new Map(graph.rows.map((/** @type {any} */ r) => [r.id, r]));
  const treeBox = h("div", { class: "lineage-tree" });
  const panel = h("div", { class: "lineage-step", id: "lineage-step" }, h("p", { class: "muted" }, "Select a state to see the step into it."));
  fill(root, h("h1", null, `${graph.task}'s lineage`),
    facts([["GPU", graph.gpu], ["states", String(graph.rows.filter((/** @type {any} */ r) => r.status !== "rejected").length)],
      ["rejected attempts", String(graph.rows.filter((/** @type {any} */ r) => r.status === "rejected").length)],
      ["complete", graph.complete ? "yes: the plain attempt was reached" : "no"], ["stopped", graph.stopped],
      ["physics floor", graph.floor_ms != null ? `${graph.floor_ms.toFixed(4)} ms (the datasheet's ceilings at the task's sizes)` : null]]),
    h("p", { class: "lede" }, "From the plain attempt (the root) to the expert: the highlighted path. Each edge is one optimization turned on."),
    h("div", { class: "lineage-layout" }, treeBox, panel));
  root.dataset.path = graph.path.join(",");
  const view = new TreeView(treeBox, { width: 900, height: 560, onSelect: (id) => show(id) });
  const tree = stratifyRows(rows.values());
  const draw = (/** @type {number|null} */ selectedId) => view.render({ root: tree.root, rows, run: { best_node: graph.expert_id },
    selectedId, collapseFailed: false });
  draw(null);
  // Opened at a state (a card's risk links to where its attempt was made): show it.
  const wanted = new URLSearchParams(window.location.hash.slice(1)).get("state");
  const opened = wanted == null ? undefined : graph.rows.find((/** @type {any} */ r) => r.flags_on === wanted);
  if (opened) show(opened.id);

  function show(/** @type {number} */ id) {
    const row = rows.get(id);
    if (!row) return;
    draw(id);
    const deltas = Object.entries(row.metric_deltas ?? {});
    fill(panel, h("h2", null, row.flags_on), facts([["step", row.title], ["status", row.guard ? `${row.status} (${row.guard})` : row.status],
      ["time", row.time_ms != null ? `${row.time_ms.toFixed(4)} ms` : null],
      ["speed-up over its parent", row.speedup ? `${row.speedup.toFixed(2)}x` : null],
      ["share of the ceiling", typeof row.share_of_ceiling === "number"
        ? `${shareText(row.share_of_ceiling)} (the physics floor over this time)` : null],
      ["on the path to the expert", graph.path.includes(id) ? "yes" : "no"]]),
    row.message ? h("p", { class: "error" }, row.message) : null,
    // The walk records each metric's difference, after − before, in the metric's own unit.
    deltas.length ? table(["metric", "after − before"], deltas.map(([k, v]) => [k, signed(Number(v))]), { class: "deltas" }) : null,
    row.diff ? diffBlock(row.diff) : null);
  }
}
