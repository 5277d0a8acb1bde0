// The search tree in SVG: d3-zoom for pan and zoom, nodes joined by id and touched only
// when what they show changed, links drawn as two paths (all, and the best path).
import { select } from "d3-selection";
import { zoom, zoomIdentity } from "d3-zoom";
import { bestNodeId, pathFromRoot } from "../transforms/best.js";
import { layoutTree } from "../transforms/layout.js";
import { checkOptions } from "../transforms/options.js";
import { fitTransform, linksPathData } from "../transforms/paths.js";
import { statusClass } from "../transforms/rows.js";
import { format } from "../transforms/runs.js";
import { COLOURS, nodeColourScale, nodeRadiusScale } from "../transforms/style.js";

export class TreeView {
  /**
   * @param {Element} container
   * @param {{width?: number, height?: number, onSelect?: (id: number) => void,
   *   onToggleFailed?: (parentId: number) => void, onToggleCollapse?: (id: number) => void,
   *   zoom?: boolean, nodeSpacing?: number, levelSpacing?: number}} [options]
   */
  constructor(container, options) {
    this.o = checkOptions("TreeView", options, {
      width: { type: "number", default: 900, min: 50 },
      height: { type: "number", default: 520, min: 50 },
      onSelect: { type: "function", default: () => {} },
      onToggleFailed: { type: "function", default: () => {} },
      onToggleCollapse: { type: "function", default: () => {} },
      zoom: { type: "boolean", default: true },
      nodeSpacing: { type: "number", default: 18, min: 1 },
      levelSpacing: { type: "number", default: 90, min: 1 },
    });
    const { width, height } = this.o;
    this.svg = select(container).append("svg")
      .attr("class", "tree").attr("viewBox", `0 0 ${width} ${height}`)
      .attr("width", width).attr("height", height).attr("role", "img").attr("aria-label", "search tree");
    this.viewport = this.svg.append("g").attr("class", "viewport");
    this.links = this.viewport.append("path").attr("class", "links");
    this.bestLinks = this.viewport.append("path").attr("class", "links best");
    this.nodeLayer = this.viewport.append("g").attr("class", "nodes");
    /** @type {Map<string, any>} */
    this.elements = new Map();
    // One listener for all nodes (event delegation), not one per node.
    this.nodeLayer.on("click", (event) => this.fromNode(event, (d) => this.clicked(event, d)))
      .on("dblclick", (event) => this.fromNode(event, (d) => this.doubleClicked(event, d)));
    this.userMoved = false;
    this.extent = null;
    if (this.o.zoom) {
      this.zoom = zoom().scaleExtent([0.02, 8]).on("zoom", (event) => {
        this.viewport.attr("transform", event.transform);
        if (event.sourceEvent) this.userMoved = true; // a person panned: stop auto-fitting
      });
      this.svg.call(/** @type {any} */ (this.zoom)).on("dblclick.zoom", null);
    }
  }

  /**
   * @param {{root: any, rows: Map<number, any>, run?: Record<string, any>, selectedId?: number|null,
   *   expanded?: Set<number>, collapsed?: Set<number>, collapseFailed?: boolean}} view
   */
  render({ root, rows, run = {}, selectedId = null, expanded, collapsed, collapseFailed = true }) {
    const layout = layoutTree(root, { collapseFailed, expanded, collapsed,
      nodeSpacing: this.o.nodeSpacing, levelSpacing: this.o.levelSpacing, aspect: this.o.width / this.o.height });
    const bestId = bestNodeId(rows, run.best_node);
    const onPath = new Set(pathFromRoot(rows, bestId).map(String));
    const colour = nodeColourScale(rows.values());
    const radius = nodeRadiusScale(rows.values());
    const isBestLink = (link) => onPath.has(link.targetId) && onPath.has(String(link.sourceId));
    this.links.attr("d", linksPathData(layout.links.filter((l) => !isBestLink(l))));
    this.bestLinks.attr("d", linksPathData(layout.links.filter(isBestLink)));
    // A keyed join by hand: one Map lookup per node, new elements appended, gone ones
    // removed, and no reordering (d3's join.order() compares document positions, which
    // costs seconds at 5,000 siblings in some DOMs). Draw order does not matter here.
    const seen = new Set();
    const layer = /** @type {SVGGElement} */ (this.nodeLayer.node());
    for (const d of layout.nodes) {
      let el = this.elements.get(d.id);
      if (!el) {
        el = createNodeElement(layer.ownerDocument);
        layer.append(el);
        this.elements.set(d.id, el);
      }
      el.__data__ = d;
      paint(el, d, { colour, radius, bestId, onPath, selectedId });
      seen.add(d.id);
    }
    for (const [id, el] of this.elements) {
      if (!seen.has(id)) {
        el.remove();
        this.elements.delete(id);
      }
    }
    this.extent = layout.extent;
    if (this.o.zoom && !this.userMoved && layout.nodes.length) this.fit(false);
    return layout;
  }

  fromNode(event, handle) {
    const el = event.target instanceof Element ? event.target.closest("g.node") : null;
    if (el && /** @type {any} */ (el).__data__) handle(/** @type {any} */ (el).__data__);
  }

  clicked(event, d) {
    event.stopPropagation();
    if (d.kind === "failed-stub") this.o.onToggleFailed(d.parentId);
    else this.o.onSelect(d.nodeId);
  }

  doubleClicked(event, d) {
    event.stopPropagation();
    if (d.kind === "node" && d.childCount > 0) this.o.onToggleCollapse(d.nodeId);
  }

  /** Zoom to show the whole tree; `byHand` (the Fit button) resumes auto-fitting. */
  fit(byHand = true) {
    if (!this.zoom || !this.extent) return;
    if (byHand) this.userMoved = false;
    const { k, x, y } = fitTransform(this.extent, { width: this.o.width, height: this.o.height });
    this.svg.call(/** @type {any} */ (this.zoom).transform, zoomIdentity.translate(x, y).scale(k));
  }

  /** @param {number} id */
  centreOn(id) {
    const d = this.elements.get(String(id))?.__data__;
    if (!this.zoom || !d) return;
    this.userMoved = true;
    this.svg.call(/** @type {any} */ (this.zoom).translateTo, d.x, d.y);
  }
}

const SVG = "http://www.w3.org/2000/svg";

function createNodeElement(doc) {
  const g = doc.createElementNS(SVG, "g");
  const text = doc.createElementNS(SVG, "text");
  text.setAttribute("class", "label");
  text.setAttribute("dy", "-0.9em");
  text.setAttribute("text-anchor", "middle");
  g.append(doc.createElementNS(SVG, "circle"), text, doc.createElementNS(SVG, "title"));
  return g;
}

/** Sets what a node shows, skipping the DOM when nothing changed since the last paint. */
function paint(el, d, { colour, radius, bestId, onPath, selectedId }) {
  const stub = d.kind === "failed-stub";
  const row = d.row;
  const status = stub ? "failed-stub" : statusClass(row);
  const classes = ["node", status, onPath.has(d.id) ? "on-best" : "", row && row.id === bestId ? "best" : "",
    row && row.id === selectedId ? "selected" : "", d.hiddenCount > 0 && !stub ? "folded" : ""].filter(Boolean).join(" ");
  const r = stub ? 5 : radius(row.visits);
  const fill = stub ? COLOURS.stub : colour(row);
  const label = stub ? `${d.hiddenCount} failed` : d.hiddenCount > 0 ? `+${d.hiddenCount}`
    : row.id === bestId || row.parentId == null ? `#${row.id} ${format.ms(row.time_ms)}` : "";
  const title = stub ? `${d.hiddenCount} failed node(s) folded: click to show`
    : `#${row.id} ${row.title ?? ""}\n${row.source ?? ""} · ${status}${row.guard ? ` (${row.guard})` : ""}` +
      `\n${format.ms(row.time_ms)} · reward ${format.number(row.reward)} · visits ${row.visits ?? 0}`;
  const signature = `${d.x}|${d.y}|${classes}|${r}|${fill}|${label}|${title}`;
  if (el.__signature === signature) return;
  el.__signature = signature;
  el.setAttribute("transform", `translate(${d.x},${d.y})`);
  el.setAttribute("class", classes);
  el.setAttribute("data-id", d.id);
  const [circle, text, titleEl] = el.childNodes;
  circle.setAttribute("r", String(r));
  circle.setAttribute("fill", fill);
  text.textContent = label;
  titleEl.textContent = title;
}
