// One tree node in SVG: <g class="node ..." data-id> holding a circle, a label while it
// has one (whether it is shown is the tree's call: transforms/labels.js), and a tooltip.
// Written attribute by attribute, only where a value changed: at 5,000 nodes a redraw
// that rewrites them all costs a frame's style, layout and paint.
import { LABEL_RANK } from "../transforms/labels.js";
import { statusClass } from "../transforms/rows.js";
import { format } from "../transforms/runs.js";
import { COLOURS } from "../transforms/style.js";

export const SVG = "http://www.w3.org/2000/svg";

/**
 * What is drawn for one node, as last written to the DOM. `x`, `y`: its place in the
 * layout (absolute); `cx`, `cy`: in its block's group (transforms/stable.js placeBlocks).
 * @typedef {{g: SVGGElement & {__data__?: any}, circle: SVGCircleElement, text: SVGTextElement|null,
 *   title: SVGTitleElement, block: string|null, x: number, y: number, cx: number, cy: number, row: any,
 *   hiddenCount: number, flags: number, styleKey: string, classes: string, r: string, fill: string,
 *   label: string, rank: number, culled: boolean, held: number, tip: string, generation: number,
 *   anchor: string}} DrawnNode
 *   held: how many search matches its fold hides; anchor: its label's text-anchor (TreeView.anchorLabels)
 * @typedef {{rows: Map<number, any>, colour: (row: any) => string, radius: (visits: number|undefined) => number,
 *   bestId: number|null, onPath: Set<string>, selectedId: number|null, styleKey: string,
 *   matches: Set<number>|null, folded?: Map<string, number>|null, hoveredId: number|null}} Look
 *   matches: the nodes a search matched (null: no search); folded: how many of them each
 *   fold hides, by laid-out id (layout.js foldedMatches); hoveredId: the node under the pointer
 */

/** @returns {DrawnNode} */
export function createNode(doc, id) {
  const g = doc.createElementNS(SVG, "g");
  g.setAttribute("data-id", id);
  const circle = doc.createElementNS(SVG, "circle");
  const title = doc.createElementNS(SVG, "title");
  g.append(circle, title);
  return { g, circle, text: null, title, block: null, x: NaN, y: NaN, cx: NaN, cy: NaN, row: undefined,
    hiddenCount: -1, flags: -1, styleKey: "", classes: "", r: "", fill: "", label: "", rank: 0, culled: false,
    held: 0, tip: "", generation: 0, anchor: "middle" };
}

const ON_BEST = 1, BEST = 2, SELECTED = 4, MATCH = 8, UNMATCHED = 16, HOVERED = 32;

/**
 * Writes what a node shows at (cx, cy) in its group, skipping it when nothing it depends on
 * changed since the last time. The row is read from `look.rows` (the layout's may be older:
 * a layout is reused while the tree's shape stands).
 * @param {DrawnNode} drawn
 * @param {import("../transforms/layout.js").LaidOutNode} d
 * @param {number} cx
 * @param {number} cy
 * @param {Look} look
 */
export function paintNode(drawn, d, cx, cy, { rows, colour, radius, bestId, onPath, selectedId, styleKey, matches, folded, hoveredId }) {
  const row = d.kind === "node" ? (rows.get(/** @type {number} */ (d.nodeId)) ?? d.row) : null;
  const held = folded?.get(d.id) ?? 0; // a fold holding matches is not dimmed: it is where they are
  const flags = (onPath.has(d.id) ? ON_BEST : 0) | (row && row.id === bestId ? BEST : 0) | (row && row.id === selectedId ? SELECTED : 0)
    | (matches ? (row && matches.has(row.id) ? MATCH : held ? 0 : UNMATCHED) : 0) | (row && row.id === hoveredId ? HOVERED : 0);
  drawn.x = d.x;
  drawn.y = d.y;
  if (drawn.row === row && drawn.cx === cx && drawn.cy === cy && drawn.flags === flags && drawn.held === held &&
    drawn.hiddenCount === d.hiddenCount && drawn.styleKey === styleKey) return;
  const moved = drawn.cx !== cx || drawn.cy !== cy;
  Object.assign(drawn, { row, cx, cy, flags, held, hiddenCount: d.hiddenCount, styleKey });
  const stub = d.kind === "failed-stub";
  const status = stub ? "failed-stub" : statusClass(row);
  const screened = !stub && row.level === "screen";
  const classes = ["node", status, screened ? "screened" : "", flags & ON_BEST ? "on-best" : "",
    flags & BEST ? "best" : "", flags & SELECTED ? "selected" : "", flags & MATCH ? "match" : "",
    flags & UNMATCHED ? "unmatched" : "", held ? "holds-match" : "", d.hiddenCount > 0 && !stub ? "folded" : ""]
    .filter(Boolean).join(" ");
  const rank = stub ? (held ? LABEL_RANK.holdsMatch : LABEL_RANK.stub) : flags & HOVERED ? LABEL_RANK.hovered
    : flags & SELECTED ? LABEL_RANK.selected : flags & BEST ? LABEL_RANK.best : row.parentId == null ? LABEL_RANK.root
      : held ? LABEL_RANK.holdsMatch : flags & MATCH ? LABEL_RANK.match : d.hiddenCount > 0 ? LABEL_RANK.folded : -1;
  const heldText = held ? ` · ${held} ${held === 1 ? "match" : "matches"}` : "";
  const label = rank < 0 ? "" : stub ? `${d.hiddenCount} failed${heldText}`
    : `#${row.id} ${format.ms(row.time_ms)}${d.hiddenCount > 0 ? ` +${d.hiddenCount}` : ""}${heldText}`;
  drawn.rank = rank;
  const tip = stub ? `${d.hiddenCount} failed node(s) folded${held ? `, ${held} of them matching the search` : ""}: click to show`
    : `#${row.id} ${row.title ?? ""}\n${row.source ?? ""} · ${status}${row.guard ? ` (${row.guard})` : ""}` +
      (screened ? " · screened, not profiled" : "") +
      (row.duplicate_of != null ? ` · the same binary as #${row.duplicate_of}` : "") +
      `\n${format.ms(row.time_ms)} · reward ${format.number(row.reward)} · visits ${row.visits ?? 0}` +
      (typeof row.share_of_ceiling === "number" ? ` · ${shareText(row.share_of_ceiling)} of the ceiling` : "");
  if (moved) {
    drawn.circle.setAttribute("cx", String(cx));
    drawn.circle.setAttribute("cy", String(cy));
  }
  update(drawn, "r", String(stub ? 5 : radius(row.visits)), (v) => drawn.circle.setAttribute("r", v));
  update(drawn, "fill", stub ? COLOURS.stub : colour(row), (v) => drawn.circle.setAttribute("fill", v));
  update(drawn, "classes", classes, (v) => drawn.g.setAttribute("class", v));
  update(drawn, "tip", tip, (v) => { drawn.title.textContent = v; });
  paintLabel(drawn, label, moved);
}

/** A share of the hardware's ceiling (the physics floor over the time): "42%", "0.3%". */
export function shareText(/** @type {number} */ share) {
  const pct = 100 * share;
  return `${pct >= 10 ? pct.toFixed(0) : pct.toPrecision(1)}%`;
}

function update(drawn, key, value, write) {
  if (drawn[key] === value) return;
  drawn[key] = value;
  write(value);
}

/** A label is a <text> only while there is one: most nodes have none. */
function paintLabel(drawn, label, moved) {
  if (!label) {
    drawn.text?.remove();
    drawn.text = null;
    drawn.label = "";
    drawn.culled = false;
    return;
  }
  let text = drawn.text;
  if (!text) {
    text = drawn.text = drawn.g.ownerDocument.createElementNS(SVG, "text");
    text.setAttribute("class", "label");
    text.setAttribute("dy", "-0.9em");
    text.setAttribute("text-anchor", "middle");
    drawn.anchor = "middle";
    drawn.g.insertBefore(text, drawn.title);
    drawn.label = "";
    drawn.culled = false; // until the tree places it (TreeView.placeLabels)
    moved = true;
  }
  if (moved) {
    text.setAttribute("x", String(drawn.cx));
    text.setAttribute("y", String(drawn.cy));
  }
  if (drawn.label !== label) text.textContent = drawn.label = label;
}
