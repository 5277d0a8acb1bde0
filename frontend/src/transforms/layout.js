// Tidy tree layout (d3.tree, Reingold–Tilford) of what is visible: failed subtrees can be
// folded into one stub per parent ("5 failed"), and any node can be collapsed by hand.
// Horizontal: the root on the left, depth grows to the right. Nodes and links come in
// depth-first order (a subtree's links are neighbours, so chunks of them are compact),
// positions rounded to a tenth of a pixel (finer does not show, and a node that did not
// move compares equal to its last position).
import { hierarchy, tree } from "d3-hierarchy";
import { checkOptions } from "./options.js";
import { isFailed } from "./rows.js";
import { commonShift } from "./stable.js";

/**
 * @typedef {import("./rows.js").NodeRow} NodeRow
 * @typedef {import("d3-hierarchy").HierarchyNode<NodeRow>} TreeNode
 * @typedef {{id: string, nodeId: number|null, x: number, y: number, depth: number,
 *   row: NodeRow|null, kind: "node"|"failed-stub", hiddenCount: number, childCount: number,
 *   parentId: number|null, hidden: TreeNode[]|null}} LaidOutNode
 *   hidden: the tops of the subtrees a fold hides (a stub's failed children, a collapsed
 *   node's children); null where nothing is folded
 * @typedef {{id: string, source: {x: number, y: number}, target: {x: number, y: number},
 *   sourceId: number, targetId: string}} LaidOutLink
 */

/** @type {Record<string, import("./options.js").OptionSpec>} */
export const LAYOUT_SCHEMA = {
  nodeSpacing: { type: "number", default: 18, min: 1 }, // px between siblings
  levelSpacing: { type: "number", default: 90, min: 1 }, // px between depths
  collapseFailed: { type: "boolean", default: true },
  expanded: { type: "set", default: undefined, nullable: true }, // parents whose failed children show
  collapsed: { type: "set", default: undefined, nullable: true }, // nodes folded by hand
  // Viewport width / height: a tree much taller than wide (thousands of leaves, a few
  // levels) gets its levels spread out to this shape, so that fitting it fills the view.
  aspect: { type: "number", default: undefined, nullable: true, min: 0.01 },
  // Positions drawn before, by node id: the new layout is translated so that as many of
  // them as possible stay where they were (see stable.js); the picture is the same.
  previous: { type: "object", default: undefined, nullable: true },
};

/**
 * Marks, for every node, whether its whole subtree failed (every node in it measured
 * and not passed). Such subtrees are what "collapse failed" folds away.
 * @param {TreeNode} root
 * @returns {Set<number>} ids of nodes whose subtree failed entirely
 */
export function failedSubtrees(root) {
  const failed = new Set();
  root.eachAfter((node) => {
    if (isFailed(node.data) && (node.children ?? []).every((child) => failed.has(child.data.id))) {
      failed.add(node.data.id);
    }
  });
  return failed;
}

/**
 * @param {TreeNode|null} root
 * @param {Partial<{nodeSpacing: number, levelSpacing: number, collapseFailed: boolean,
 *   expanded: Set<number>|null, collapsed: Set<number>|null, aspect: number|null,
 *   previous: Map<string, {x: number, y: number}>|null}>} [options]
 * @returns {{nodes: LaidOutNode[], links: LaidOutLink[], extent: {x0: number, x1: number, y0: number, y1: number}}}
 */
export function layoutTree(root, options) {
  const o = checkOptions("layoutTree", options, LAYOUT_SCHEMA);
  if (root == null) return { nodes: [], links: [], extent: { x0: 0, x1: 0, y0: 0, y1: 0 } };
  const expanded = o.expanded ?? new Set();
  const collapsed = o.collapsed ?? new Set();
  const failed = o.collapseFailed ? failedSubtrees(root) : new Set();
  const visible = hierarchy(visibleShape(root, { failed, expanded, collapsed }), (d) => d.children);
  tree().nodeSize([o.nodeSpacing, o.levelSpacing])(/** @type {any} */ (visible));
  /** @type {LaidOutNode[]} */
  const nodes = [];
  /** @type {LaidOutLink[]} */
  const links = [];
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  visible.eachBefore((/** @type {any} */ v) => {
    // d3.tree lays out top-down (x across, y down); swap for a left-to-right tree.
    const px = v.y, py = v.x;
    x0 = Math.min(x0, px); x1 = Math.max(x1, px); y0 = Math.min(y0, py); y1 = Math.max(y1, py);
    const d = v.data;
    const node = v.laidOut = { id: d.key, nodeId: d.row ? d.row.id : null, x: px, y: py, depth: v.depth, row: d.row,
      kind: d.kind, hiddenCount: d.hiddenCount, childCount: d.childCount, parentId: d.parentId, hidden: d.hidden };
    nodes.push(node);
    // A link's ends are its nodes themselves: whatever moves a node moves its links.
    if (v.parent) links.push({ id: d.key, source: v.parent.laidOut, target: node, sourceId: v.parent.data.row.id, targetId: d.key });
  });
  const stretch = o.aspect && x1 > x0 ? levelStretch(((y1 - y0) * o.aspect) / (x1 - x0)) : 1;
  for (const node of nodes) {
    node.x = tenth(node.x * stretch);
    node.y = tenth(node.y);
  }
  const [dx, dy] = commonShift(nodes, o.previous);
  const extent = { x0: Infinity, x1: -Infinity, y0: Infinity, y1: -Infinity };
  for (const node of nodes) {
    node.x = tenth(node.x - dx);
    node.y = tenth(node.y - dy);
    extent.x0 = Math.min(extent.x0, node.x); extent.x1 = Math.max(extent.x1, node.x);
    extent.y0 = Math.min(extent.y0, node.y); extent.y1 = Math.max(extent.y1, node.y);
  }
  return { nodes, links, extent };
}

/**
 * How many of a search's matches each fold hides, so that a stub or a collapsed node can
 * say it holds some: a match folded away would otherwise not show at all.
 * @param {LaidOutNode[]} nodes  a layout's (layoutTree)
 * @param {Set<number>} matches  node ids
 * @returns {Map<string, number>} by laid-out id, only the folds that hide at least one
 */
export function foldedMatches(nodes, matches) {
  /** @type {Map<string, number>} */
  const counts = new Map();
  if (matches.size === 0) return counts;
  for (const node of nodes) {
    if (!node.hidden) continue;
    let count = 0;
    for (const top of node.hidden) top.each((n) => { if (matches.has(n.data.id)) count += 1; });
    if (count > 0) counts.set(node.id, count);
  }
  return counts;
}

// Steps of 2^(1/8) (9%): a growing tree's height changes its wanted stretch with every
// node, and a new stretch moves every node; in steps it changes once in many nodes.
const STRETCH_STEPS_PER_DOUBLING = 8;

/** The stretch of the levels that gives at least the wanted shape, in steps; 1 at least. */
export function levelStretch(wanted) {
  if (!(wanted > 1)) return 1;
  return 2 ** (Math.ceil(Math.log2(wanted) * STRETCH_STEPS_PER_DOUBLING - 1e-9) / STRETCH_STEPS_PER_DOUBLING);
}

const tenth = (v) => Math.round(v * 10) / 10;

/** The tree as drawn: plain objects, with failed children folded into stubs. */
function visibleShape(node, ctx) {
  const row = node.data;
  const kids = node.children ?? [];
  const shape = { key: String(row.id), row, kind: "node", hiddenCount: 0, childCount: kids.length,
    parentId: row.parentId, hidden: null, children: undefined };
  if (kids.length === 0) return shape;
  if (ctx.collapsed.has(row.id)) {
    shape.hiddenCount = subtreeSize(node) - 1;
    shape.hidden = kids;
    return shape;
  }
  const fold = !ctx.expanded.has(row.id);
  const shown = [];
  const folded = [];
  let foldedNodes = 0;
  for (const child of kids) {
    if (fold && ctx.failed.has(child.data.id)) {
      foldedNodes += subtreeSize(child);
      folded.push(child);
    } else shown.push(visibleShape(child, ctx));
  }
  if (foldedNodes > 0) {
    shown.push({ key: `failed:${row.id}`, row: null, kind: "failed-stub", hiddenCount: foldedNodes,
      childCount: 0, parentId: row.id, hidden: folded, children: undefined });
  }
  shape.children = /** @type {any} */ (shown);
  return shape;
}

/** Nodes in a subtree, itself included (counted, not listed: this runs for every fold). */
function subtreeSize(node) {
  let size = 0;
  const stack = [node];
  while (stack.length) {
    const next = stack.pop();
    size += 1;
    if (next.children) for (const child of next.children) stack.push(child);
  }
  return size;
}
