// SVG path data for tree links, as one string per class of link: thousands of <path>
// elements cost the browser far more than one long path.

const round = (v) => Math.round(v * 10) / 10;

/**
 * A horizontal cubic link (the look of d3.linkHorizontal) from each source to target.
 * @param {Array<{source: {x: number, y: number}, target: {x: number, y: number}}>} links
 */
export function linksPathData(links) {
  let d = "";
  for (const { source, target } of links) {
    const mx = round((source.x + target.x) / 2);
    d += `M${round(source.x)},${round(source.y)}C${mx},${round(source.y)} ${mx},${round(target.y)} ${round(target.x)},${round(target.y)}`;
  }
  return d;
}

/**
 * The zoom that fits an extent into a viewport with a margin, never zooming in past `maxScale`.
 * @param {{x0: number, x1: number, y0: number, y1: number}} extent
 * @param {{width: number, height: number, margin?: number, maxScale?: number}} viewport
 */
export function fitTransform(extent, { width, height, margin = 40, maxScale = 1.5 }) {
  const w = Math.max(1, extent.x1 - extent.x0);
  const h = Math.max(1, extent.y1 - extent.y0);
  const k = Math.min(maxScale, (width - 2 * margin) / w, (height - 2 * margin) / h);
  const x = margin - extent.x0 * k + Math.max(0, (width - 2 * margin - w * k) / 2);
  const y = height / 2 - ((extent.y0 + extent.y1) / 2) * k;
  return { k, x, y };
}
