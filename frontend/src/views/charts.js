// Small SVG charts: the best-so-far timeline (redrawn in place as a run grows: it can hold
// thousands of points) and the roofline (drawn once per node, from scratch).
import { select } from "d3-selection";
import { scaleLinear, scaleLog } from "d3-scale";
import { line, curveStepAfter } from "d3-shape";
import { checkOptions } from "../transforms/options.js";
import { format } from "../transforms/runs.js";
import { effectPoints } from "../transforms/skills.js";

const MARGIN = { top: 22, right: 16, bottom: 30, left: 56 };
const SVG = "http://www.w3.org/2000/svg";

/**
 * Draws the timeline once into `container` (a new chart each call); a page that redraws
 * it as a run grows keeps a TimelineView instead.
 * @param {Element} container
 * @param {import("../transforms/timeline.js").TimelinePoint[]} points
 * @param {{width?: number, height?: number, budget?: number|null, vendorMs?: number|null, floorMs?: number|null,
 *   onSelect?: (id: number) => void}} [options]
 */
export function renderTimeline(container, points, options) {
  const { budget, vendorMs, floorMs, ...rest } = options ?? {};
  return new TimelineView(container, rest).render(points, { budget, vendorMs, floorMs });
}

/**
 * The best-so-far timeline, redrawn in place: points joined by node id and written only
 * when they moved (a run of 5,000 evaluations has thousands of points, and a new one
 * moves none of them unless the axes change), the axes only when their domains change.
 */
export class TimelineView {
  /**
   * @param {Element} container
   * @param {{width?: number, height?: number, onSelect?: (id: number) => void}} [options]
   */
  constructor(container, options) {
    this.o = checkOptions("TimelineView", options, {
      width: { type: "number", default: 640, min: 100 },
      height: { type: "number", default: 180, min: 60 },
      onSelect: { type: "function", default: () => {} },
    });
    this.container = container;
    /** @type {import("d3-selection").Selection<SVGSVGElement, unknown, null, undefined>|null} */
    this.svg = null;
    /** @type {Map<number, {circle: SVGCircleElement, improved: boolean|null, cx: number, cy: number, index: number, time: number|null}>} */
    this.points = new Map();
    this.axesKey = "";
    this.lineData = "";
  }

  /**
   * @param {import("../transforms/timeline.js").TimelinePoint[]} points
   * @param {{budget?: number|null, vendorMs?: number|null, floorMs?: number|null}} [options]
   */
  render(points, options) {
    const { budget, vendorMs, floorMs } = checkOptions("TimelineView.render", options, {
      budget: { type: "number", default: undefined, nullable: true, min: 0 },
      vendorMs: { type: "number", default: undefined, nullable: true, min: 0 },
      floorMs: { type: "number", default: undefined, nullable: true, min: 0 },
    });
    const o = this.o;
    const passed = points.filter((p) => p.time_ms != null && p.time_ms > 0);
    if (passed.length === 0) return this.empty();
    const svg = this.frame();
    // A log scale: one slow outlier must not flatten the best path against the axis,
    // and the vendor's time and the physics floor (often 10x apart) fit on one chart.
    const references = [["vendor", vendorMs], ["physics floor", floorMs]]
      .filter(([, v]) => typeof v === "number" && v > 0);
    const times = [...passed.map((p) => /** @type {number} */ (p.time_ms)), ...references.map(([, v]) => /** @type {number} */ (v))];
    const lo = Math.min(...times), hi = Math.max(...times);
    const x = scaleLinear().domain([1, Math.max(2, budget ?? 0, points.length)]).range([MARGIN.left, o.width - MARGIN.right]);
    const y = scaleLog().domain([lo / 1.15, hi * 1.15]).range([o.height - MARGIN.bottom, MARGIN.top]);
    const axesKey = `${x.domain()}|${y.domain()}|${references.flat()}`;
    if (axesKey !== this.axesKey) {
      this.axesKey = axesKey;
      svg.selectAll("g.axis, g.references").remove();
      axes(svg, x, y, o, { x: "evaluation", y: "time (ms, log scale)" }, false, true);
      const g = svg.append("g").attr("class", "references");
      for (const [name, value] of references) {
        const at = round(y(/** @type {number} */ (value)));
        g.append("line").attr("class", `reference ${name === "vendor" ? "vendor" : "floor"}`)
          .attr("x1", MARGIN.left).attr("x2", o.width - MARGIN.right).attr("y1", at).attr("y2", at);
        g.append("text").attr("class", "reference-label").attr("x", o.width - MARGIN.right - 2).attr("y", at - 3)
          .attr("text-anchor", "end").text(`${name} ${format.ms(/** @type {number} */ (value))}`);
      }
      for (const name of ["path.best-so-far", "g.points"]) svg.select(name).raise(); // axes stay under the data
    }
    const best = points.filter((p) => p.best_ms != null);
    const stepped = [...best, { ...best[best.length - 1], index: points.length }];
    const lineData = line().curve(curveStepAfter).x((/** @type {any} */ p) => x(p.index)).y((/** @type {any} */ p) => y(p.best_ms))(/** @type {any} */ (stepped)) ?? "";
    if (lineData !== this.lineData) svg.select("path.best-so-far").attr("d", (this.lineData = lineData));
    this.drawPoints(passed, x, y);
    return svg.node();
  }

  /** Points by node id; a point is written only when where or how it is drawn changed. */
  drawPoints(passed, x, y) {
    const layer = /** @type {SVGGElement} */ (/** @type {any} */ (this.svg).select("g.points").node());
    const seen = new Set();
    for (const p of passed) {
      let drawn = this.points.get(p.id);
      if (!drawn) {
        const circle = layer.ownerDocument.createElementNS(SVG, "circle");
        drawn = { circle, improved: null, cx: NaN, cy: NaN, index: NaN, time: NaN };
        layer.append(circle);
        this.points.set(p.id, drawn);
      }
      /** @type {any} */ (drawn.circle).__data__ = p;
      const cx = round(x(p.index)), cy = round(y(/** @type {number} */ (p.time_ms)));
      if (drawn.improved !== p.improved || drawn.cx !== cx || drawn.cy !== cy) {
        Object.assign(drawn, { improved: p.improved, cx, cy });
        drawn.circle.setAttribute("class", p.improved ? "improved" : "measured");
        drawn.circle.setAttribute("cx", String(cx));
        drawn.circle.setAttribute("cy", String(cy));
        drawn.circle.setAttribute("r", p.improved ? "4" : "2.5");
      }
      if (drawn.index !== p.index || drawn.time !== p.time_ms) {
        Object.assign(drawn, { index: p.index, time: p.time_ms });
        const title = drawn.circle.firstChild ?? drawn.circle.appendChild(layer.ownerDocument.createElementNS(SVG, "title"));
        title.textContent = `#${p.id}: ${format.ms(p.time_ms)} (evaluation ${p.index})`;
      }
      seen.add(p.id);
    }
    for (const [id, drawn] of this.points) {
      if (!seen.has(id)) {
        drawn.circle.remove();
        this.points.delete(id);
      }
    }
  }

  /** The chart's svg, made on first use: axes, the best-so-far line, the points. */
  frame() {
    if (this.svg) return this.svg;
    const o = this.o;
    this.container.querySelector("svg.timeline")?.remove();
    const svg = select(this.container).append("svg").attr("class", "timeline").attr("viewBox", `0 0 ${o.width} ${o.height}`)
      .attr("width", o.width).attr("height", o.height).attr("role", "img").attr("aria-label", "best time so far, by evaluation");
    svg.append("path").attr("class", "best-so-far");
    // One listener for every point (event delegation): a run can have thousands.
    svg.append("g").attr("class", "points").on("click", (event) => {
      const p = event.target instanceof Element ? /** @type {any} */ (event.target.closest("circle"))?.__data__ : null;
      if (p) o.onSelect(p.id);
    });
    this.svg = /** @type {any} */ (svg);
    return /** @type {any} */ (svg);
  }

  empty() {
    const o = this.o;
    const shown = this.container.querySelector("svg.timeline");
    if (!this.svg && shown?.querySelector("text.empty")) return shown;
    shown?.remove();
    Object.assign(this, { svg: null, points: new Map(), axesKey: "", lineData: "" });
    const svg = select(this.container).append("svg").attr("class", "timeline").attr("viewBox", `0 0 ${o.width} ${o.height}`)
      .attr("width", o.width).attr("height", o.height).attr("role", "img").attr("aria-label", "best time so far, by evaluation");
    svg.append("text").attr("class", "empty").attr("x", o.width / 2).attr("y", o.height / 2)
      .attr("text-anchor", "middle").text("No measured kernel yet");
    return svg.node();
  }
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
  for (const level of model.levels) {  // the hierarchical roofline, where it was measured
    const end = Math.min(level.ridge, model.xDomain[1]);
    svg.append("path").attr("class", `ceiling level level-${level.level}`)
      .attr("d", `M${round(x(a.x))},${round(y(level.bandwidth * a.x))}L${round(x(end))},${round(y(level.bandwidth * end))}`)
      .append("title").text(`${level.level} ${format.rate(level.bandwidth, "B/s")} (the GPU's own ceiling, from ncu)`);
    const point = svg.append("g").attr("class", `level-point level-${level.level}`);
    point.append("circle").attr("r", 3.5).attr("cx", round(x(level.x))).attr("cy", round(y(level.y)))
      .append("title").text(`${level.level}: ${format.number(level.x)} FLOP/byte, ${format.rate(level.y, "FLOP/s")} (measured)`);
    point.append("text").attr("class", "level-label").attr("x", round(x(level.x)) + 5).attr("y", round(y(level.y)) - 4)
      .text(level.level);
  }
  svg.append("circle").attr("class", "kernel-point").attr("r", 5)
    .attr("cx", round(x(model.point.x))).attr("cy", round(y(model.point.y)))
    .append("title").text(`${format.number(model.point.x)} FLOP/byte, ${format.rate(model.point.y, "FLOP/s")} ` +
      `(${(model.efficiency * 100).toFixed(0)}% of the ${model.bound} roof)`);
  return svg.node();
}

/**
 * Several runs' best-so-far curves over each other (the compare page): one step line per
 * run on a log time axis against evaluations, each labelled at its end.
 * @param {Element} container
 * @param {{label: string, points: {x: number, y: number}[]}[]} series
 * @param {{width?: number, height?: number}} [options]
 */
export function renderCurves(container, series, options) {
  const o = checkOptions("renderCurves", options, {
    width: { type: "number", default: 640, min: 100 },
    height: { type: "number", default: 200, min: 60 },
  });
  const drawn = series.filter((s) => s.points.length);
  select(container).selectAll("*").remove();
  if (!drawn.length) {
    select(container).append("p").attr("class", "muted").text("Neither run has a kernel the full gate passed yet.");
    return null;
  }
  const xs = drawn.flatMap((s) => s.points.map((p) => p.x)), ys = drawn.flatMap((s) => s.points.map((p) => p.y));
  const x = scaleLinear().domain([1, Math.max(2, ...xs)]).range([MARGIN.left, o.width - MARGIN.right - 60]);
  const y = scaleLog().domain([Math.min(...ys) / 1.15, Math.max(...ys) * 1.15]).range([o.height - MARGIN.bottom, MARGIN.top]);
  const svg = select(container).append("svg").attr("class", "curves").attr("viewBox", `0 0 ${o.width} ${o.height}`)
    .attr("role", "img").attr("aria-label", "best time so far of each run, by evaluation");
  axes(svg, x, y, o, { x: "evaluation", y: "best time (ms, log scale)" }, false, true);
  const path = line().x((/** @type {any} */ p) => x(p.x)).y((/** @type {any} */ p) => y(p.y)).curve(curveStepAfter);
  drawn.forEach((s, i) => {
    const g = svg.append("g").attr("class", `curve curve-${i}`).attr("data-label", s.label);
    g.append("path").attr("d", path(/** @type {any} */ (s.points)));
    const last = s.points[s.points.length - 1];
    g.append("text").attr("x", round(x(last.x)) + 4).attr("y", round(y(last.y)) + 4).text(s.label);
  });
  return svg.node();
}

function axes(svg, x, y, o, labels, log = false, logTime = false) {
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
  for (const t of logTime ? timeTicks(y) : log ? decades(y.domain()) : y.ticks(4)) {
    gy.append("text").attr("x", MARGIN.left - 6).attr("y", round(y(t)) + 4).attr("text-anchor", "end")
      .text(logTime ? String(Number(t.toPrecision(2))) : tickLabel(t, log));
    gy.append("line").attr("class", "grid").attr("x1", MARGIN.left).attr("x2", o.width - MARGIN.right)
      .attr("y1", round(y(t))).attr("y2", round(y(t)));
  }
  gy.append("text").attr("class", "axis-label").attr("x", 4).attr("y", 11).text(labels.y);
}

/** A log time axis' ticks: d3's, thinned to at most five so the labels stay readable. */
function timeTicks(y) {
  const ticks = y.ticks(5);
  const step = Math.ceil(ticks.length / 5);
  return ticks.filter((/** @type {number} */ _, /** @type {number} */ i) => i % step === 0);
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

/**
 * A skill card's measured effects (lineage.selectors.skill_card_effects): one row per
 * source of evidence (a lineage, a run, the roundtrip's failed trials), a dot per
 * measured speed-up on a log axis, 1x marked; each dot links where it was measured.
 * Trials with no speed-up (they failed the gate) are counted at the row's end.
 * @param {Element} container
 * @param {Parameters<typeof effectPoints>[0]} groups
 * @param {{width?: number}} [options]
 */
export function renderEffects(container, groups, options) {
  const o = checkOptions("renderEffects", options, { width: { type: "number", default: 640, min: 200 } });
  const left = 170;
  const row = 22;
  const height = MARGIN.top + row * Math.max(groups.length, 1) + MARGIN.bottom;
  const { points, missing, domain } = effectPoints(groups);
  const svg = select(container).append("svg").attr("class", "effects-chart").attr("viewBox", `0 0 ${o.width} ${height}`)
    .attr("width", o.width).attr("height", height).attr("role", "img")
    .attr("aria-label", `measured speed-ups: ${points.length} points in ${groups.length} rows`);
  const x = scaleLog().domain(domain).range([left, o.width - MARGIN.right - 40]);
  const y = (/** @type {number} */ r) => MARGIN.top + row * r + row / 2;
  const bottom = height - MARGIN.bottom;
  svg.append("line").attr("class", "unity").attr("x1", round(x(1))).attr("x2", round(x(1)))
    .attr("y1", MARGIN.top - 6).attr("y2", bottom);
  svg.append("text").attr("class", "axis-label").attr("x", round(x(1))).attr("y", MARGIN.top - 9)
    .attr("text-anchor", "middle").text("1x");
  for (const t of x.ticks(5).filter((/** @type {number} */ t) => t !== 1)) {
    svg.append("text").attr("class", "tick").attr("x", round(x(t))).attr("y", bottom + 14)
      .attr("text-anchor", "middle").text(`${Number(t.toPrecision(2))}x`);
  }
  svg.append("text").attr("class", "axis-label").attr("x", o.width - MARGIN.right).attr("y", height - 2)
    .attr("text-anchor", "end").text("speed-up over the state before (log)");
  groups.forEach((group, r) => {
    const label = svg.append("g").attr("class", `effects-row ${group.kind}`).attr("data-kind", group.kind);
    const text = label.append("text").attr("x", left - 8).attr("y", y(r) + 4).attr("text-anchor", "end").text(group.label);
    if (group.link) text.attr("class", "row-link").on("click", () => { window.location.href = String(group.link); });
    label.append("line").attr("class", "grid").attr("x1", left).attr("x2", o.width - MARGIN.right - 40)
      .attr("y1", y(r)).attr("y2", y(r));
    const failed = missing.filter((p) => p.row === r).length;
    if (failed) {
      label.append("text").attr("class", "failed-count").attr("x", o.width - MARGIN.right).attr("y", y(r) + 4)
        .attr("text-anchor", "end").text(`${failed} ✗`).append("title").text(`${failed} without a speed-up (failed the gate)`);
    }
  });
  for (const point of points) {
    const dot = svg.append("circle").attr("class", `effect-point ${point.kind}${point.speedup >= 1 ? " faster" : " slower"}`)
      .attr("r", 4).attr("cx", round(x(point.speedup))).attr("cy", y(point.row)).attr("data-speedup", point.speedup);
    dot.append("title").text(`${point.speedup.toFixed(3)}x: ${point.what}`);
    if (point.link) dot.on("click", () => { window.location.href = String(point.link); });
  }
  return svg.node();
}
