// The search tree in SVG. A redraw touches only what changed: nodes are joined by id and
// an attribute is written only when its value changed; a new layout is translated back so
// that most of the tree stays put, and the tree is drawn in blocks (groups with their own
// offset, transforms/stable.js) so that a subtree the layout shifted moves by one
// attribute; links are drawn in chunks of one path each, rewritten only when one of their
// links moved. Zoom and pan set one transform on one group. Labels keep a readable size
// at any zoom (one style variable scales them all) and those that would overlap a more
// important one are hidden (transforms/labels.js); the node under the pointer and the
// nodes a search matched are labelled, the others dimmed; a fold that hides matches
// (a failed stub, a collapsed node) says how many.
import { select } from "d3-selection";
import { zoom, zoomIdentity, zoomTransform } from "d3-zoom";
import { bestNodeId, pathFromRoot } from "../transforms/best.js";
import { labelAnchor, labelScale, labelWidthPx, nodeScale, placeLabels } from "../transforms/labels.js";
import { foldedMatches, layoutTree } from "../transforms/layout.js";
import { checkOptions } from "../transforms/options.js";
import { mergeExtents, placeChain } from "../transforms/generation.js";
import { fitTransform, linksPathData } from "../transforms/paths.js";
import { chunkLinks, placeBlocks } from "../transforms/stable.js";
import { RADIUS, nodeColourScale, nodeRadiusScale } from "../transforms/style.js";
import { ChainLayer } from "./treeChain.js";
import { SVG, createNode, paintNode } from "./treeNodes.js";

/**
 * @typedef {import("./treeNodes.js").DrawnNode} DrawnNode
 * @typedef {{sx: number, sy: number, tx: number, ty: number, d: string}} LinkText
 * @typedef {{path: SVGPathElement, members: LinkText[]}} DrawnChunk
 * @typedef {{x: number, y: number, transform: string, links: SVGGElement, nodes: SVGGElement,
 *   chunks: Map<string, DrawnChunk>, generation: number}} DrawnBlock
 */

export class TreeView {
  /**
   * @param {Element} container
   * @param {{width?: number, height?: number, onSelect?: (id: number) => void,
   *   onToggleFailed?: (parentId: number) => void, onToggleCollapse?: (id: number) => void,
   *   onSelectAttempt?: (index: number) => void, zoom?: boolean, nodeSpacing?: number, levelSpacing?: number}} [options]
   */
  constructor(container, options) {
    this.o = checkOptions("TreeView", options, {
      width: { type: "number", default: 900, min: 50 },
      height: { type: "number", default: 520, min: 50 },
      onSelect: { type: "function", default: () => {} },
      onToggleFailed: { type: "function", default: () => {} },
      onToggleCollapse: { type: "function", default: () => {} },
      onSelectAttempt: { type: "function", default: () => {} }, // an attempt of the generation chain (-1: the intent)
      zoom: { type: "boolean", default: true },
      nodeSpacing: { type: "number", default: 18, min: 1 },
      levelSpacing: { type: "number", default: 90, min: 1 },
    });
    const { width, height } = this.o;
    this.svg = select(container).append("svg")
      .attr("class", "tree").attr("viewBox", `0 0 ${width} ${height}`)
      .attr("width", width).attr("height", height).attr("role", "img").attr("aria-label", "search tree");
    this.viewport = this.svg.append("g").attr("class", "viewport");
    this.linkLayer = this.viewport.append("g").attr("class", "links"); // under every node
    this.bestLinks = this.viewport.append("path").attr("class", "links best");
    this.nodeLayer = this.viewport.append("g").attr("class", "nodes");
    this.chain = new ChainLayer(/** @type {SVGGElement} */ (this.viewport.node()), (i) => this.o.onSelectAttempt(i));
    /** @type {Map<string, DrawnNode>} nodes by id */
    this.drawn = new Map();
    /** @type {Map<string, DrawnBlock>} blocks by the id of their root node */
    this.blocks = new Map();
    /** @type {import("../transforms/stable.js").BlockPlan} */
    this.plan = { blocks: new Map(), blockOf: new Map() };
    /** @type {Map<string, LinkText>} each link's path text in its block, by link id */
    this.linkTexts = new Map();
    this.bestPathData = "";
    this.generation = 0;
    /** @type {ReturnType<typeof layoutTree>|null} */
    this.layout = null;
    /** @type {{root: any, shape: string}} what the layout was made from */
    this.laidOut = { root: null, shape: "" };
    // One listener for all nodes (event delegation), not one per node.
    this.nodeLayer.on("click", (event) => this.fromNode(event, (d) => this.clicked(event, d)))
      .on("dblclick", (event) => this.fromNode(event, (d) => this.doubleClicked(event, d)))
      .on("mouseover", (event) => this.fromNode(event, (d) => this.hover(d.nodeId)))
      .on("mouseout", () => this.hover(null));
    this.userMoved = false;
    this.extent = null;
    /** @type {number|null} */
    this.hoveredId = null;
    /** @type {import("./treeNodes.js").Look|null} */
    this.look = null;
    this.searching = false;
    /** @type {{layout: any, matches: Set<number>|null, counts: Map<string, number>|null}} */
    this.folded = { layout: null, matches: null, counts: null }; // foldedMatches, kept while neither changed
    this.labelK = 1; // the zoom the labels were last placed at (1: --label-scale unset means 1)
    /** @type {Set<string>} the ids whose labels are shown (placeLabels) */
    this.shownLabels = new Set();
    if (this.o.zoom) {
      this.zoom = zoom().scaleExtent([0.02, 8]).on("zoom", (event) => {
        this.viewport.attr("transform", event.transform);
        this.placeLabels();
        if (event.sourceEvent) this.userMoved = true; // a person panned: stop auto-fitting
      });
      this.svg.call(/** @type {any} */ (this.zoom)).on("dblclick.zoom", null);
    }
  }

  /**
   * `root` is the rows' hierarchy (stratifyRows). Given the same object again (and the same
   * folding), the view reuses its layout and only repaints nodes whose rows changed: pass
   * it again only while no node was added or removed, changed parent, or failed.
   * `matches`: the nodes a search matched, highlighted and labelled (null: no search).
   * `generation`: how the root was written from an intent (transforms/generation.js),
   * drawn before it; `selectedAttempt`: the one of its attempts selected (-1: the intent).
   * @param {{root: any, rows: Map<number, any>, run?: Record<string, any>, selectedId?: number|null,
   *   expanded?: Set<number>, collapsed?: Set<number>, collapseFailed?: boolean,
   *   matches?: Set<number>|null, generation?: import("../transforms/generation.js").GenerationChain|null,
   *   selectedAttempt?: number|null}} view
   */
  render({ root, rows, run = {}, selectedId = null, expanded, collapsed, collapseFailed = true, matches = null,
    generation = null, selectedAttempt = null }) {
    // The same hierarchy with the same folding is the same layout: nodes are repainted
    // from their current rows, nothing is laid out or moved.
    const shape = `${collapseFailed}|${[...(expanded ?? [])].sort()}|${[...(collapsed ?? [])].sort()}`;
    const relayout = !this.layout || root !== this.laidOut.root || shape !== this.laidOut.shape;
    this.generation += 1;
    if (relayout) {
      this.layout = layoutTree(root, { collapseFailed, expanded, collapsed, nodeSpacing: this.o.nodeSpacing,
        levelSpacing: this.o.levelSpacing, aspect: this.o.width / this.o.height, previous: this.drawn });
      this.laidOut = { root, shape };
      this.plan = placeBlocks(this.layout.nodes, { offsets: this.blocks, positions: this.drawn });
      this.drawBlocks();
    }
    const layout = /** @type {NonNullable<typeof this.layout>} */ (this.layout);
    const bestId = bestNodeId(rows, run.best_node);
    const onPath = new Set(pathFromRoot(rows, bestId).map(String));
    const colour = nodeColourScale(rows.values());
    const radius = nodeRadiusScale(rows.values());
    if (this.folded.layout !== layout || this.folded.matches !== matches) {
      this.folded = { layout, matches, counts: matches && foldedMatches(layout.nodes, matches) };
    }
    this.look = { rows, colour, radius, bestId, onPath, selectedId, styleKey: `${colour.key}|${radius.key}`,
      matches, folded: this.folded.counts, hoveredId: this.hoveredId };
    this.drawNodes(layout.nodes, this.look);
    if (this.searching !== (matches != null)) this.svg.classed("searching", (this.searching = matches != null));
    if (relayout) {
      this.drawLinks(layout.links);
      this.removeStaleBlocks();
    }
    const bestPathData = linksPathData(layout.links.filter((l) => onPath.has(l.targetId) && onPath.has(String(l.sourceId))));
    if (bestPathData !== this.bestPathData) this.bestLinks.attr("d", (this.bestPathData = bestPathData));
    const rootNode = generation ? layout.nodes.find((d) => d.kind === "node" && d.parentId == null) : undefined;
    const chain = generation && rootNode ? placeChain(generation, rootNode, { spacing: this.o.levelSpacing * 1.5 }) : null;
    this.chain.draw(chain, selectedAttempt);
    this.extent = chain ? mergeExtents(layout.extent, chain.extent) : layout.extent;
    if (this.o.zoom && !this.userMoved && layout.nodes.length) this.fit(false);
    this.placeLabels(true);
    return layout;
  }

  /** A group per block in each layer (links, nodes), nested as the blocks are, at its offset. */
  drawBlocks() {
    const linkLayer = /** @type {SVGGElement} */ (this.linkLayer.node());
    const nodeLayer = /** @type {SVGGElement} */ (this.nodeLayer.node());
    const doc = linkLayer.ownerDocument;
    for (const block of this.plan.blocks.values()) { // parents first
      let drawn = this.blocks.get(block.id);
      if (!drawn) {
        drawn = { x: 0, y: 0, transform: "", links: doc.createElementNS(SVG, "g"), nodes: doc.createElementNS(SVG, "g"),
          chunks: new Map(), generation: 0 };
        this.blocks.set(block.id, drawn);
      }
      const parent = block.parent == null ? null : /** @type {DrawnBlock} */ (this.blocks.get(block.parent));
      if (drawn.links.parentNode !== (parent?.links ?? linkLayer)) (parent?.links ?? linkLayer).append(drawn.links);
      if (drawn.nodes.parentNode !== (parent?.nodes ?? nodeLayer)) (parent?.nodes ?? nodeLayer).append(drawn.nodes);
      const parentOrigin = parent == null ? { x: 0, y: 0 } : /** @type {import("../transforms/stable.js").Block} */ (this.plan.blocks.get(/** @type {string} */ (block.parent)));
      const transform = `translate(${tenth(block.x - parentOrigin.x)},${tenth(block.y - parentOrigin.y)})`;
      if (drawn.transform !== transform) {
        drawn.transform = transform;
        drawn.links.setAttribute("transform", transform);
        drawn.nodes.setAttribute("transform", transform);
      }
      drawn.x = block.x;
      drawn.y = block.y;
      drawn.generation = this.generation;
    }
  }

  /** Groups of blocks that are gone; what they held has moved to other blocks by now. */
  removeStaleBlocks() {
    for (const [id, drawn] of this.blocks) {
      if (drawn.generation === this.generation) continue;
      drawn.links.remove();
      drawn.nodes.remove();
      this.blocks.delete(id);
    }
  }

  /** Nodes by id, each in its block's group: new ones appended, gone ones removed, the rest written only where changed. */
  drawNodes(nodes, look) {
    const doc = /** @type {Document} */ (this.nodeLayer.node()?.ownerDocument);
    for (const d of nodes) {
      let drawn = this.drawn.get(d.id);
      if (!drawn) {
        drawn = createNode(doc, d.id);
        this.drawn.set(d.id, drawn);
      }
      const blockId = /** @type {string} */ (this.plan.blockOf.get(d.id));
      const block = /** @type {DrawnBlock} */ (this.blocks.get(blockId));
      if (drawn.block !== blockId) {
        block.nodes.append(drawn.g);
        drawn.block = blockId;
      }
      drawn.g.__data__ = d;
      drawn.generation = this.generation;
      paintNode(drawn, d, tenth(d.x - block.x), tenth(d.y - block.y), look);
    }
    for (const [id, drawn] of this.drawn) {
      if (drawn.generation !== this.generation) {
        drawn.g.remove();
        this.drawn.delete(id);
      }
    }
  }

  /**
   * Links in the block of their parent node, as chunks of one path each; a chunk's path is
   * rewritten only when one of its links moved in the block or changed.
   */
  drawLinks(links) {
    /** @type {Map<string, any[]>} */
    const byBlock = new Map();
    for (const link of links) {
      const blockId = /** @type {string} */ (this.plan.blockOf.get(String(link.sourceId)));
      const list = byBlock.get(blockId);
      if (list) list.push(link);
      else byBlock.set(blockId, [link]);
    }
    /** @type {Map<string, LinkText>} */
    const texts = new Map();
    for (const [blockId, block] of this.blocks) {
      const blockLinks = byBlock.get(blockId) ?? [];
      const chunks = chunkLinks(blockLinks, new Set(block.chunks.keys()));
      /** @type {Map<string, DrawnChunk>} */
      const kept = new Map();
      for (const chunk of chunks) {
        const drawn = block.chunks.get(chunk.key) ?? { path: block.links.ownerDocument.createElementNS(SVG, "path"), members: [] };
        if (!drawn.path.parentNode) block.links.prepend(drawn.path); // under the groups of child blocks
        let changed = drawn.members.length !== chunk.links.length;
        chunk.links.forEach((link, i) => {
          const sx = tenth(link.source.x - block.x), sy = tenth(link.source.y - block.y);
          const tx = tenth(link.target.x - block.x), ty = tenth(link.target.y - block.y);
          let text = this.linkTexts.get(link.id);
          if (!text || text.sx !== sx || text.sy !== sy || text.tx !== tx || text.ty !== ty) {
            text = { sx, sy, tx, ty, d: linksPathData([{ source: { x: sx, y: sy }, target: { x: tx, y: ty } }]) };
          }
          texts.set(link.id, text);
          if (drawn.members[i] !== text) changed = true;
          drawn.members[i] = text;
        });
        if (changed) {
          drawn.members.length = chunk.links.length;
          drawn.path.setAttribute("d", drawn.members.map((text) => text.d).join(""));
        }
        kept.set(chunk.key, drawn);
      }
      for (const [key, drawn] of block.chunks) {
        if (!kept.has(key)) drawn.path.remove();
      }
      block.chunks = kept;
    }
    this.linkTexts = texts;
  }

  /**
   * Shows the labels that fit at the current zoom, at a size that can be read, and hides
   * the rest (class "culled"); only the labels whose state changed are written. Again
   * after a redraw (`changed`), or when the zoom's scale changed (a pan moves nothing).
   */
  placeLabels(changed = false) {
    const t = this.zoom ? zoomTransform(/** @type {Element} */ (this.svg.node())) : zoomIdentity;
    const k = t.k;
    if (!changed && k === this.labelK) return this.anchorLabels(t);
    if (labelScale(k) !== labelScale(this.labelK)) {
      this.svg.style("--label-scale", String(labelScale(k)));
    }
    if (nodeScale(k, RADIUS.min) !== nodeScale(this.labelK, RADIUS.min)) {
      this.svg.style("--node-scale", String(nodeScale(k, RADIUS.min)));
    }
    this.labelK = k;
    /** @type {import("../transforms/labels.js").LabelCandidate[]} */
    const candidates = [];
    for (const [id, drawn] of this.drawn) {
      if (drawn.text) candidates.push({ id, x: drawn.x, y: drawn.y, text: drawn.label, rank: drawn.rank });
    }
    const shown = placeLabels(candidates, k);
    for (const [id, drawn] of this.drawn) {
      const culled = !!drawn.text && !shown.has(id);
      if (drawn.text && drawn.culled !== culled) drawn.text.classList.toggle("culled", culled);
      drawn.culled = culled;
    }
    this.shownLabels = shown;
    this.anchorLabels(t);
  }

  /**
   * Keeps the shown labels inside the frame: one that would cross its right edge ends at
   * its node, one that would cross the left edge starts there (transforms/labels.js
   * labelAnchor). At every zoom event, a pan included; only the shown labels are looked at.
   * @param {{k: number, x: number}} t the zoom's transform
   */
  anchorLabels(t) {
    for (const id of this.shownLabels) {
      const drawn = this.drawn.get(id);
      if (!drawn?.text) continue;
      const anchor = labelAnchor(t.x + drawn.x * t.k, labelWidthPx(drawn.label, t.k), this.o.width);
      if (drawn.anchor !== anchor) drawn.text.setAttribute("text-anchor", drawn.anchor = anchor);
    }
  }

  /** The node under the pointer gets a label of the first rank; null: none. */
  hover(/** @type {number|null} */ id) {
    if (id === this.hoveredId || !this.look) return;
    const before = this.hoveredId;
    this.hoveredId = id;
    this.look = { ...this.look, hoveredId: id };
    for (const nodeId of [before, id]) {
      const drawn = nodeId == null ? undefined : this.drawn.get(String(nodeId));
      if (drawn?.g.__data__) paintNode(drawn, drawn.g.__data__, drawn.cx, drawn.cy, this.look);
    }
    this.placeLabels(true);
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
    const now = zoomTransform(/** @type {Element} */ (this.svg.node()));
    if (now.k === k && now.x === x && now.y === y) return; // the tree did not grow past its frame
    this.svg.call(/** @type {any} */ (this.zoom).transform, zoomIdentity.translate(x, y).scale(k));
  }

  /** @param {number} id */
  centreOn(id) {
    const d = this.drawn.get(String(id))?.g.__data__;
    if (!this.zoom || !d) return;
    this.userMoved = true;
    this.svg.call(/** @type {any} */ (this.zoom).translateTo, d.x, d.y);
  }
}

const tenth = (v) => Math.round(v * 10) / 10;
