// The tree's first nodes, before the search's root: the intent and the attempts that
// wrote the first kernel (transforms/generation.js places them). A handful of nodes,
// redrawn whole when the chain, the root's place or the selection changed.
import { linksPathData } from "../transforms/paths.js";
import { COLOURS } from "../transforms/style.js";
import { SVG } from "./treeNodes.js";

const INTENT_SIZE = 7; // px, the side of the intent's square: smaller than any search node
const ATTEMPT_RADIUS = 5; // px

export class ChainLayer {
  /**
   * @param {SVGGElement} viewport the tree's zoomed group: the layer is added to it only
   *   once there is a chain, so a tree without one is drawn exactly as before
   * @param {(index: number) => void} onSelect an attempt's index, or -1 for the intent
   */
  constructor(viewport, onSelect) {
    this.viewport = viewport;
    this.onSelect = onSelect;
    /** @type {SVGGElement|null} */
    this.group = null;
    this.key = "";
  }

  /**
   * @param {ReturnType<typeof import("../transforms/generation.js").placeChain>|null} placed
   * @param {number|null} selected the selected attempt's index (-1: the intent)
   */
  draw(placed, selected) {
    const key = placed ? JSON.stringify([placed.nodes.map((n) => [n.id, n.x, n.y, n.label]), placed.links.at(-1)?.target, selected]) : "";
    if (key === this.key) return;
    this.key = key;
    this.group?.replaceChildren();
    if (!placed) return;
    if (!this.group) this.group = this.layer();
    const group = this.group;
    const doc = group.ownerDocument;
    const links = doc.createElementNS(SVG, "path");
    links.setAttribute("class", "generation-links");
    links.setAttribute("d", linksPathData(placed.links));
    group.append(links);
    for (const node of placed.nodes) group.append(chainNode(doc, node, node.index === selected));
  }

  /** @returns {SVGGElement} */
  layer() {
    const group = /** @type {SVGGElement} */ (this.viewport.ownerDocument.createElementNS(SVG, "g"));
    group.setAttribute("class", "generation");
    group.addEventListener("click", (event) => {
      const g = event.target instanceof Element ? event.target.closest("g.generation-node") : null;
      if (!g) return;
      event.stopPropagation();
      this.onSelect(Number(g.getAttribute("data-index")));
    });
    this.viewport.append(group);
    return group;
  }
}

/** @param {Document} doc @param {import("../transforms/generation.js").PlacedChainNode} node @param {boolean} selected */
function chainNode(doc, node, selected) {
  const g = doc.createElementNS(SVG, "g");
  g.setAttribute("class", ["generation-node", node.kind, node.failed ? "failed" : "", selected ? "selected" : ""]
    .filter(Boolean).join(" "));
  g.setAttribute("data-index", String(node.index));
  if (node.stage) g.setAttribute("data-stage", node.stage);
  let mark;
  if (node.kind === "intent") {
    mark = doc.createElementNS(SVG, "rect");
    /** @type {[string, number][]} */
    const box = [["x", node.x - INTENT_SIZE / 2], ["y", node.y - INTENT_SIZE / 2], ["width", INTENT_SIZE], ["height", INTENT_SIZE]];
    for (const [k, v] of box) mark.setAttribute(k, String(v));
  } else {
    mark = doc.createElementNS(SVG, "circle");
    mark.setAttribute("cx", String(node.x));
    mark.setAttribute("cy", String(node.y));
    mark.setAttribute("r", String(ATTEMPT_RADIUS));
    mark.setAttribute("fill", node.failed ? COLOURS.failed : COLOURS.neutral);
  }
  const label = doc.createElementNS(SVG, "text");
  label.setAttribute("class", "label");
  label.setAttribute("x", String(node.x));
  label.setAttribute("y", String(node.y));
  label.setAttribute("dy", node.labelBelow ? "1.6em" : "-0.9em");
  label.setAttribute("text-anchor", "middle");
  label.textContent = node.label;
  const title = doc.createElementNS(SVG, "title");
  title.textContent = node.tip;
  g.append(mark, label, title);
  return g;
}
