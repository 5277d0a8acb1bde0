// Flat {id, parentId} rows -> a d3 hierarchy. Rows whose parent has not arrived yet (a
// websocket can deliver a child before the snapshot that holds its parent) are kept
// waiting, not dropped and not an error: they join as soon as the parent does.
import { hierarchy } from "d3-hierarchy";

export class StratifyError extends Error {
  constructor(message) {
    super(message);
    this.name = "StratifyError";
  }
}

/**
 * @typedef {import("./rows.js").NodeRow} NodeRow
 * @typedef {import("d3-hierarchy").HierarchyNode<NodeRow>} TreeNode
 */

/**
 * @param {Iterable<NodeRow>} rows
 * @returns {{root: TreeNode|null, waiting: NodeRow[]}}
 */
export function stratifyRows(rows) {
  const all = [...rows];
  const roots = all.filter((row) => row.parentId == null);
  if (roots.length > 1) {
    throw new StratifyError(`a run has one root, got ${roots.length}: ids ${roots.map((r) => r.id).join(", ")}`);
  }
  const childrenOf = new Map();
  for (const row of all) {
    if (row.parentId == null) continue;
    const list = childrenOf.get(row.parentId);
    if (list) list.push(row);
    else childrenOf.set(row.parentId, [row]);
  }
  if (roots.length === 0) return { root: null, waiting: all };
  const stack = [roots[0]];
  const seen = new Set();
  while (stack.length) {
    const row = /** @type {NodeRow} */ (stack.pop());
    if (seen.has(row.id)) throw new StratifyError(`node ${row.id} appears twice`);
    seen.add(row.id);
    for (const child of childrenOf.get(row.id) ?? []) stack.push(child);
  }
  // Children in id order (the order they were proposed), as d3.stratify of sorted rows
  // gave; built by d3.hierarchy from the lists at hand, without stratify's id lookups.
  for (const list of childrenOf.values()) list.sort((a, b) => a.id - b.id);
  const root = hierarchy(roots[0], (row) => childrenOf.get(row.id));
  root.each((node) => {
    /** @type {any} */ (node).id = String(node.data.id); // as d3.stratify names nodes
  });
  return {
    root: /** @type {TreeNode} */ (root),
    waiting: all.filter((row) => !seen.has(row.id)),
  };
}
