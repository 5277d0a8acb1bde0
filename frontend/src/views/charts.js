// Small SVG charts: the best-so-far timeline and the roofline. Each renders from scratch
// (a few hundred elements at most) into the container it is given.
import { select } from "d3-selection";
import { scaleLinear, scaleLog } from "d3-scale";
import { line, curveStepAfter } from "d3-shape";
import { checkOptions } from "../transforms/options.js";
import { format } from "../transforms/runs.js";

const MARGIN = { top: 22, right: 16, bottom: 30, left: 56 };

/**
 * @param {Element} container
 * @param {import("../transforms/timeline.js").TimelinePoint[]} points
 * @param {{width?: number, height?: number, budget?: number|null, onSelect?: (id: number) => void}} [options]
 */
export function renderTimeline(container, points, options) {
  const o = checkOptions("renderTimeline", options, {
    width: { type: "number", default: 640, min: 100 },
    height: { type: "number", default: 180, min: 60 },
    budget: { type: "number", default: undefined, nullable: true, min: 0 },
    onSelect: { type: "function", default: () => {} },
  });
  const root = select(container);
  root.selectAll("svg.timeline").remove();
  const svg = root.append("svg").attr("class", "timeline").attr("viewBox", `0 0 ${o.width} ${o.height}`)
    .attr("width", o.width).attr("height", o.height).attr("role", "img").attr("aria-label", "best time so far, by evaluation");
  const passed = points.filter((p) => p.time_ms != null);
  if (passed.length === 0) {
    svg.append("text").attr("class", "empty").attr("x", o.width / 2).attr("y", o.height / 2)
      .attr("text-anchor", "middle").text("No measured kernel yet");
    return svg.node();
  }
  const times = passed.map((p) => /** @type {number} */ (p.time_ms));
  const lo = Math.min(...times), hi = Math.max(...times);
  const pad = (hi - lo) * 0.1 || hi * 0.1 || 1;
  const x = scaleLinear().domain([1, Math.max(2, o.budget ?? 0, points.length)]).range([MARGIN.left, o.width - MARGIN.right]);
  const y = scaleLinear().domain([Math.max(0, lo - pad), hi + pad]).nice().range([o.height - MARGIN.bottom, MARGIN.top]);
  axes(svg, x, y, o, { x: "evaluation", y: "time (ms)" });
  const best = points.filter((p) => p.best_ms != null);
  const last = best[best.length - 1];
  const stepped = [...best, { ...last, index: points.length }];
  svg.append("path").attr("class", "best-so-far")
    .attr("d", line().curve(curveStepAfter).x((/** @type {any} */ p) => x(p.index)).y((/** @type {any} */ p) => y(p.best_ms))(/** @type {any} */ (stepped)));
  svg.append("g").attr("class", "points").selectAll("circle").data(passed).join("circle")
    .attr("class", (p) => (p.improved ? "improved" : "measured"))
    .attr("cx", (p) => round(x(p.index))).attr("cy", (p) => round(y(/** @type {number} */ (p.time_ms))))
    .attr("r", (p) => (p.improved ? 4 : 2.5))
    .on("click", (_event, p) => o.onSelect(p.id))
    .append("title").text((p) => `#${p.id}: ${format.ms(p.time_ms)} (evaluation ${p.index})`);
  return svg.node();
}

/**
 * @param {Element} container
 * @param {ReturnType<typeof import("../transforms/roofline.js").rooflineModel>} model
 * @param {{width?: number, height?: number}} [options]
 */
export function renderRoofline(container, model, options) {
  const o = checkOptions("renderRoofline", options, {
    width: { type: "number", default: 420, min: 100 },
    height: { type: "number", default: 260, min: 80 },
  });
  const svg = select(container).append("svg").attr("class", "roofline").attr("viewBox", `0 0 ${o.width} ${o.height}`)
    .attr("width", o.width).attr("height", o.height).attr("role", "img").attr("aria-label", "roofline");
  const x = scaleLog().domain(model.xDomain).range([MARGIN.left, o.width - MARGIN.right]);
  const y = scaleLog().domain(model.yDomain).range([o.height - MARGIN.bottom, MARGIN.top]);
  axes(svg, x, y, o, { x: "FLOP / byte", y: "FLOP/s" }, true);
  const [a, ridge, b] = model.roof;
  svg.append("path").attr("class", "ceiling dram")
    .attr("d", `M${round(x(a.x))},${round(y(a.y))}L${round(x(ridge.x))},${round(y(ridge.y))}`);
  svg.append("path").attr("class", "ceiling fp32")
    .attr("d", `M${round(x(ridge.x))},${round(y(ridge.y))}L${round(x(b.x))},${round(y(b.y))}`);
  svg.append("text").attr("class", "ceiling-label").attr("x", round(x(b.x)) - 4).attr("y", round(y(b.y)) - 5)
    .attr("text-anchor", "end").text(`FP32 ${format.rate(ridge.y, "FLOP/s")}`);
  const slope = x(a.x) + (x(ridge.x) - x(a.x)) * 0.3;
  svg.append("text").attr("class", "ceiling-label").attr("x", round(slope)).attr("y", round(y(a.y * (ridge.x / a.x) ** 0.3)) - 6)
    .text(`DRAM ${format.rate(ridge.y / ridge.x, "B/s")}`);
  svg.append("circle").attr("class", "kernel-point").attr("r", 5)
    .attr("cx", round(x(model.point.x))).attr("cy", round(y(model.point.y)))
    .append("title").text(`${format.number(model.point.x)} FLOP/byte, ${format.rate(model.point.y, "FLOP/s")} ` +
      `(${(model.efficiency * 100).toFixed(0)}% of the ${model.bound} roof)`);
  return svg.node();
}

function axes(svg, x, y, o, labels, log = false) {
  const bottom = o.height - MARGIN.bottom;
  const gx = svg.append("g").attr("class", "axis x");
  gx.append("line").attr("x1", MARGIN.left).attr("x2", o.width - MARGIN.right).attr("y1", bottom).attr("y2", bottom);
  const xTicks = log ? decades(x.domain()) : x.ticks(6).filter(Number.isInteger);
  for (const t of xTicks) {
    gx.append("text").attr("x", round(x(t))).attr("y", bottom + 14).attr("text-anchor", "middle").text(tickLabel(t, log));
  }
  gx.append("text").attr("class", "axis-label").attr("x", o.width - MARGIN.right).attr("y", o.height - 2)
    .attr("text-anchor", "end").text(labels.x);
  const gy = svg.append("g").attr("class", "axis y");
  gy.append("line").attr("x1", MARGIN.left).attr("x2", MARGIN.left).attr("y1", MARGIN.top).attr("y2", bottom);
  for (const t of log ? decades(y.domain()) : y.ticks(4)) {
    gy.append("text").attr("x", MARGIN.left - 6).attr("y", round(y(t)) + 4).attr("text-anchor", "end").text(tickLabel(t, log));
    gy.append("line").attr("class", "grid").attr("x1", MARGIN.left).attr("x2", o.width - MARGIN.right)
      .attr("y1", round(y(t))).attr("y2", round(y(t)));
  }
  gy.append("text").attr("class", "axis-label").attr("x", 4).attr("y", 11).text(labels.y);
}

function decades([lo, hi]) {
  const out = [];
  for (let e = Math.ceil(Math.log10(lo)); e <= Math.floor(Math.log10(hi)); e++) out.push(10 ** e);
  return out.length > 7 ? out.filter((_, i) => i % 2 === 0) : out;
}

function tickLabel(t, log) {
  if (log) return `1e${Math.round(Math.log10(t))}`;
  return Number.isInteger(t) ? String(t) : String(Number(t.toPrecision(3)));
}

function round(v) {
  return Math.round(v * 10) / 10;
}
