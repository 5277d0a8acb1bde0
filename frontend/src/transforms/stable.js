// Keeping a growing tree's drawing still: what a redraw after one new node has to touch.
// A tidy layout recomputed with one more node shifts whole subtrees (d3.tree pins the
// root and centres each parent over its children), so the same tree laid out twice can
// differ by a translation of most of it. These pure functions find that translation (for
// layoutTree to take back) and cut the links into chunks that keep their members, so
// that only what really moved is redrawn.

/**
 * @typedef {import("./layout.js").LaidOutNode} LaidOutNode
 * @typedef {import("./layout.js").LaidOutLink} LaidOutLink
 */

/**
 * The (dx, dy) by which most of the nodes known before moved; [0, 0] if none were, or
 * if as many stayed. Positions are compared to a tenth of a pixel (layoutTree's rounding).
 * @param {LaidOutNode[]} nodes
 * @param {Map<string, {x: number, y: number}>|null|undefined} previous
 * @returns {[number, number]}
 */
export function commonShift(nodes, previous) {
  if (!previous || previous.size === 0) return [0, 0];
  /** @type {Map<number, {dx: number, dy: number, count: number}>} shifts in tenths of a pixel, by key */
  const counts = new Map();
  let still = 0;
  let best = { dx: 0, dy: 0, count: 0 };
  for (const node of nodes) {
    const before = previous.get(node.id);
    if (before === undefined) continue;
    const dx = Math.round((node.x - before.x) * 10), dy = Math.round((node.y - before.y) * 10);
    if (dx === 0 && dy === 0) {
      still += 1; // the common case, counted apart
      continue;
    }
    const key = dx * SHIFT_KEY_STRIDE + dy;
    let shift = counts.get(key);
    if (!shift) counts.set(key, (shift = { dx, dy, count: 0 }));
    shift.count += 1;
    if (shift.count > best.count) best = shift;
  }
  return best.count > still ? [best.dx / 10, best.dy / 10] : [0, 0];
}

// One number per (dx, dy) in tenths of a pixel, exact while |dy| < 2^25 tenths (3,355 km
// of tree; a 5,000-node tree is ~30,000 px tall) and the key < 2^53.
const SHIFT_KEY_STRIDE = 2 ** 26;

/**
 * @typedef {{key: string, links: LaidOutLink[]}} LinkChunk
 */

/**
 * Links (in depth-first order) cut into chunks of about `size`, each drawn as one path:
 * one path of thousands of curves is slow to paint and to zoom (every tile strokes all of
 * it), thousands of paths are slow to lay out. A chunk starts where a chunk started
 * before (`starts`, by the id of its first link's target) and is cut again only when it
 * reaches twice `size`, so a new link changes the one chunk it joins, not every chunk
 * after it.
 * @param {LaidOutLink[]} links
 * @param {Set<string>|null} [starts] the keys of the chunks drawn before
 * @param {{size?: number}} [options]
 * @returns {LinkChunk[]}
 */
export function chunkLinks(links, starts = null, { size = LINKS_PER_CHUNK } = {}) {
  if (!(Number.isInteger(size) && size > 0)) throw new RangeError(`size must be a positive whole number, got ${size}`);
  const known = starts && starts.size > 0 ? starts : null;
  /** @type {LinkChunk[]} */
  const chunks = [];
  /** @type {LinkChunk|null} */
  let current = null;
  for (const link of links) {
    const full = current && current.links.length >= (known ? 2 * size : size);
    if (!current || full || (known && known.has(link.id))) {
      current = { key: link.id, links: [] };
      chunks.push(current);
    }
    current.links.push(link);
  }
  return chunks;
}

// Links per path: in Chromium at 5,000 links, one path zoomed at ~30 frames/s and 50
// chunks of 100 at 60 (bench lab, 2026-11-29); 64 keeps a redrawn chunk's text short.
export const LINKS_PER_CHUNK = 64;

const tenth = (v) => Math.round(v * 10) / 10;

/**
 * @typedef {{id: string, parent: string|null, x: number, y: number}} Block
 * @typedef {{blocks: Map<string, Block>, blockOf: Map<string, string>}} BlockPlan
 */

/**
 * The tree cut into blocks that move as one: the root's, and one for every subtree of at
 * least `minSize` nodes. A node is drawn relative to its block's origin and a block
 * relative to its parent block's, so a tidy layout that shifts a whole subtree (what
 * d3.tree does to its neighbours when a node joins) rewrites one block's offset, not every
 * node in it. A block that was drawn before keeps its origin, moved by the most common
 * shift of its nodes: the nodes that moved with the majority keep their place in it.
 * @param {LaidOutNode[]} nodes in depth-first order from the root (layoutTree's), positions absolute
 * @param {{offsets: Map<string, {x: number, y: number}>, positions: Map<string, {x: number, y: number}>}|null} previous
 *   block origins and node positions (absolute) as drawn before
 * @param {{minSize?: number}} [options]
 * @returns {BlockPlan} blocks parents first, origins absolute
 */
export function placeBlocks(nodes, previous, { minSize = BLOCK_MIN_NODES } = {}) {
  if (!(Number.isInteger(minSize) && minSize > 0)) throw new RangeError(`minSize must be a positive whole number, got ${minSize}`);
  if (nodes.length > 0 && nodes[0].depth !== 0) throw new RangeError(`nodes must start at the root (depth 0), got depth ${nodes[0].depth}`);
  const { parentAt, sizeAt } = preorderShape(nodes);
  const blockAt = new Int32Array(nodes.length);
  /** @type {Map<string, string>} */
  const blockOf = new Map();
  /** @type {Map<string, {id: string, parent: string|null, root: LaidOutNode, members: LaidOutNode[]}>} */
  const found = new Map();
  nodes.forEach((d, i) => {
    const parent = parentAt[i];
    const own = parent < 0 || sizeAt[i] >= minSize;
    blockAt[i] = own ? i : blockAt[parent];
    if (own) found.set(d.id, { id: d.id, parent: parent < 0 ? null : nodes[blockAt[parent]].id, root: d, members: [] });
    const block = nodes[blockAt[i]].id;
    blockOf.set(d.id, block);
    found.get(block)?.members.push(d);
  });
  /** @type {Map<string, Block>} */
  const blocks = new Map();
  for (const { id, parent, root, members } of found.values()) {
    const before = previous?.offsets.get(id);
    const [dx, dy] = before ? commonShift(members, previous?.positions) : [0, 0];
    const origin = before ? { x: tenth(before.x + dx), y: tenth(before.y + dy) } : { x: root.x, y: root.y };
    blocks.set(id, { id, parent, ...origin });
  }
  return { blocks, blockOf };
}

/**
 * Each node's parent (index, -1 for the root) and subtree size, read off depth-first
 * order: a subtree is the run of nodes after its root that are deeper than it.
 * @param {LaidOutNode[]} nodes
 */
function preorderShape(nodes) {
  const parentAt = new Int32Array(nodes.length);
  const sizeAt = new Int32Array(nodes.length);
  /** @type {number[]} */
  const open = [];
  nodes.forEach((d, i) => {
    while (open.length && nodes[open[open.length - 1]].depth >= d.depth) {
      const done = /** @type {number} */ (open.pop());
      sizeAt[done] = i - done;
    }
    parentAt[i] = open.length ? open[open.length - 1] : -1;
    open.push(i);
  });
  for (const done of open) sizeAt[done] = nodes.length - done;
  return { parentAt, sizeAt };
}

// Nodes a subtree needs to be a block of its own: 16 cut the synthetic 5,000-node tree of
// bench/browser_live.py into ~700 blocks and a new node's redraw from ~2,000 rewritten
// positions (one layout-wide shift taken back) to ~400 at p90 (bench lab, 2026-11-29);
// 8 saved little more, 64 much less.
export const BLOCK_MIN_NODES = 32;
