// Which node labels the tree shows at a zoom, pure. A label keeps at least its 11 px on
// screen however far the tree is zoomed out (the tree view scales its font by
// labelScale), so every label shown can be read at "Fit"; labels that would overlap one
// already placed are left out, the more important first (rank: the node under the
// pointer, the selection, the best, the root, folds that hide search matches, search
// matches, folded subtrees, folded failures). What is left out is one hover or zoom step
// away. A fold's hidden matches rank above the shown ones: its label is all that tells
// of them, where a shown match also has its ring.

export const LABEL_PX = 11; // styles.css: svg.tree .node .label
// Mean advance of a character of "#123 0.806 ms" in system-ui at 11 px (Chromium: 6.0 to
// 6.3 px); a label a little wider than measured only leaves a little more room.
const CHAR_PX = 6.3;
const LINE_PX = 13; // the line box of 11 px text
const LIFT_EM = 0.9; // treeNodes.js: a label's baseline sits 0.9 em above its node
const GAP_PX = 2; // between two labels, so that their halos do not touch
const CELL_PX = 64; // the grid that collisions are looked up in

export const LABEL_RANK = /** @type {const} */ ({
  hovered: 0, selected: 1, best: 2, root: 3, holdsMatch: 4, match: 5, folded: 6, stub: 7,
});

/**
 * How much a label's font is scaled in the tree's own units at zoom `k`: 1 from 100 %
 * up (it grows with the tree), 1/k below (it stays 11 px on screen). Rounded to a
 * hundredth, so that a zoom step that changes nothing visible writes nothing.
 * @param {number} k
 */
export function labelScale(k) {
  return k >= 1 ? 1 : Math.round(100 / k) / 100;
}

// The smallest radius a node's circle keeps on screen when the tree is zoomed out: at
// "Fit" a few hundred nodes' circles would be under a pixel, leaving only the links.
export const NODE_MIN_PX = 2.5;

/**
 * How much the nodes' circles are scaled at zoom `k`: 1 from 100 % up; below, enough
 * that the smallest (`minRadius`, styles' RADIUS.min) keeps NODE_MIN_PX on screen, and
 * never more than 1/k (a circle is never drawn larger on screen than at 100 %). Dense
 * columns of nodes then read as a strip in their status colours. Rounded to a hundredth.
 * @param {number} k
 * @param {number} minRadius
 */
export function nodeScale(k, minRadius) {
  if (k >= 1) return 1;
  const needed = NODE_MIN_PX / (minRadius * k);
  return Math.round(100 * Math.min(1 / k, Math.max(1, needed))) / 100;
}

/** A label's width on screen at zoom `k`, as placeLabels reckons it. */
export function labelWidthPx(/** @type {string} */ text, /** @type {number} */ k) {
  return text.length * CHAR_PX * labelScale(k) * k;
}

/**
 * Where a label is anchored on its node so that it stays inside the tree's frame: centred
 * above it, or ending at it near the right edge, or starting at it near the left edge.
 * @param {number} screenX the node's x on screen, in the frame's pixels
 * @param {number} width the label's width on screen (labelWidthPx)
 * @param {number} frameWidth
 * @returns {"middle"|"end"|"start"}
 */
export function labelAnchor(screenX, width, frameWidth, pad = 4) {
  if (screenX + width / 2 > frameWidth - pad && screenX - width >= pad) return "end";
  if (screenX - width / 2 < pad && screenX + width <= frameWidth - pad) return "start";
  return "middle";
}

/**
 * @typedef {{id: string, x: number, y: number, text: string, rank: number}} LabelCandidate
 *   x, y: the node's place in the tree's units (the layout's)
 */

/**
 * The labels to show at zoom `k` (translation does not change what overlaps): each
 * candidate's box on screen, above its node, placed by rank (then id) where it does not
 * overlap a label placed before it.
 * @param {Iterable<LabelCandidate>} candidates
 * @param {number} k
 * @returns {Set<string>} ids of the labels shown
 */
export function placeLabels(candidates, k) {
  if (!(k > 0)) throw new Error(`placeLabels: zoom must be positive, not ${k}`);
  const screenPx = labelScale(k) * k; // screen px per label px: 1 below 100 %, k above
  const order = [...candidates].sort((a, b) => a.rank - b.rank || compareIds(a.id, b.id));
  /** @type {Map<string, number[][]>} */
  const grid = new Map();
  const shown = new Set();
  for (const label of order) {
    const width = (label.text.length * CHAR_PX + GAP_PX) * screenPx;
    const bottom = label.y * k - (LIFT_EM * LABEL_PX - 3) * screenPx; // 3 px: the descent below the baseline
    const box = [label.x * k - width / 2, bottom - (LINE_PX + GAP_PX) * screenPx, label.x * k + width / 2, bottom];
    const cells = cellsOf(box);
    if (cells.some((cell) => (grid.get(cell) ?? []).some((other) => overlaps(other, box)))) continue;
    for (const cell of cells) {
      const list = grid.get(cell);
      if (list) list.push(box);
      else grid.set(cell, [box]);
    }
    shown.add(label.id);
  }
  return shown;
}

/** @param {number[]} box  [x0, y0, x1, y1] on screen */
function cellsOf(box) {
  const [x0, y0, x1, y1] = box;
  const cells = [];
  for (let i = Math.floor(x0 / CELL_PX); i <= Math.floor(x1 / CELL_PX); i++) {
    for (let j = Math.floor(y0 / CELL_PX); j <= Math.floor(y1 / CELL_PX); j++) cells.push(`${i},${j}`);
  }
  return cells;
}

const overlaps = (a, b) => a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3];

/** Node ids ("12") before stub ids ("failed:3"), numbers in numeric order. */
function compareIds(a, b) {
  const x = Number(a), y = Number(b);
  if (Number.isFinite(x) && Number.isFinite(y)) return x - y;
  if (Number.isFinite(x) !== Number.isFinite(y)) return Number.isFinite(x) ? -1 : 1;
  return a < b ? -1 : a > b ? 1 : 0;
}
