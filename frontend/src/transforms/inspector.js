// A node's detail from the API, put in the shape the inspector shows: every section
// present or explicitly empty, so the drawing code has no guessing to do.
import { metricDeltas } from "./deltas.js";
import { rooflineModel, RooflineError } from "./roofline.js";

/**
 * @param {Record<string, any>} detail GET .../nodes/<id>/
 * @param {Record<string, any>|undefined} row the node's row in the tree, if known
 */
export function inspectorModel(detail, row = undefined) {
  if (detail == null || typeof detail !== "object") throw new TypeError("no node detail");
  const measurement = detail.measurement ?? {};
  // The row's `source` names who proposed the node; the detail's `source` may be the
  // kernel's code. Code has a newline; a proposer's name never does.
  const looksLikeCode = (text) => typeof text === "string" && text.includes("\n");
  const code = detail.kernel_source ?? (looksLikeCode(detail.source) ? detail.source : null) ?? detail.candidate?.source ?? null;
  const proposer = detail.proposer ?? (looksLikeCode(detail.source) ? row?.source : detail.source) ?? row?.source ?? null;
  let roofline = null, rooflineProblem = null;
  if (detail.roofline) {
    try {
      roofline = rooflineModel(detail.roofline);
    } catch (error) {
      if (!(error instanceof RooflineError)) throw error;
      rooflineProblem = error.message;
    }
  } else {
    rooflineProblem = "no profile for this node";
  }
  return {
    id: detail.id ?? row?.id,
    parentId: detail.parentId ?? detail.parent ?? row?.parentId ?? null,
    title: detail.title ?? row?.title ?? "",
    proposer,
    rationale: detail.rationale ?? "",
    state: detail.state ?? row?.state,
    status: detail.status ?? row?.status ?? null,
    guard: detail.guard ?? row?.guard ?? null,
    message: measurement.message ?? null,
    timeMs: detail.time_ms ?? measurement.time_ms ?? null,
    spreadMs: detail.spread_ms ?? measurement.spread_ms ?? null,
    reward: detail.reward ?? null,
    visits: detail.visits ?? row?.visits ?? 0,
    value: detail.value ?? null,
    prior: detail.prior ?? null,
    replayed: Boolean(measurement.replayed),
    // "full" (the gate) or "screen" (the screen only: fewer seeds and runs, no profile).
    level: detail.level || row?.level || measurement.level || null,
    // A full-gate node the screen promoted: what the screen saw first ({time_ms, seconds}).
    promotedFromScreen: detail.promoted_from_screen ?? measurement.screen ?? null,
    // A screened-only node faster than the run's best: why it is not the best, in words.
    screenNote: typeof detail.screen_note === "string" && detail.screen_note ? detail.screen_note : null,
    code,
    plan: detail.plan ?? detail.candidate?.plan ?? null,
    diffVsParent: detail.diff ?? "",
    diffVsRoot: detail.diff_vs_root ?? "",
    diagnosis: detail.diagnosis ?? null,
    deltasVsParent: metricDeltas(detail.deltas_vs_parent),
    deltasVsRoot: metricDeltas(detail.deltas_vs_root),
    rewardTerms: Object.entries(detail.reward_terms ?? {}).sort((a, b) => Math.abs(b[1]) - Math.abs(a[1])),
    compile: compileModel(detail.compile),
    profile: detail.profile ?? null,
    families: Array.isArray(detail.families) ? detail.families : [],
    ...generationParts(detail.params),
    evaluationIndex: detail.evaluation_index ?? null,
    reused: Boolean(detail.reused),
    duplicateOf: typeof detail.duplicate_of === "number" ? detail.duplicate_of : null,
    judgeError: detail.judge_error ?? null,
    correctness: Array.isArray(detail.correctness) ? detail.correctness : [],
    // Where the checks' inputs were drawn ("gpu: ..."); null for older verdicts
    inputsDrawn: typeof detail.inputs === "string" && detail.inputs ? detail.inputs : null,
    timing: timingModel(detail.timing, detail.references),
    roofline,
    rooflineProblem,
    ncuReportUrl: detail.ncu_report_url ?? null,
  };
}

/**
 * The gate's timed runs as the inspector tells them: the median and its spread, how many
 * runs and how many of them were verified, the physics floor and why, and where the
 * verified runs' references were computed. null when the node was not timed.
 * @param {any} timing the verdict's timing (TimingReport)
 * @param {any} references the verdict's environment.references ("" or absent: the host)
 */
export function timingModel(timing, references) {
  if (timing == null || typeof timing !== "object" || timing.median_ms == null) return null;
  const number = (v) => (typeof v === "number" && Number.isFinite(v) ? v : null);
  return {
    medianMs: number(timing.median_ms), p10Ms: number(timing.p10_ms), p90Ms: number(timing.p90_ms),
    minMs: number(timing.min_ms), maxMs: number(timing.max_ms), runs: number(timing.runs),
    spotChecks: number(timing.spot_checks), floorMs: number(timing.floor_ms),
    floorReason: typeof timing.floor_reason === "string" ? timing.floor_reason : "",
    references: typeof references === "string" && references ? references : "host",
  };
}

/**
 * The compile step, whether the API sends the gate's compile record ({ok, kernels,
 * errors, log, ...}) or just its kernels.
 * @param {any} compile
 * @returns {{ok: boolean|null, seconds: number|null, cached: boolean, kernels: any[], errors: any[], log: string|null}|null}
 */
export function compileModel(compile) {
  if (compile == null) return null;
  if (Array.isArray(compile)) return { ok: null, seconds: null, cached: false, kernels: compile, errors: [], log: null };
  return { ok: compile.ok ?? null, seconds: compile.seconds ?? null, cached: Boolean(compile.cached),
    kernels: Array.isArray(compile.kernels) ? compile.kernels : [], errors: Array.isArray(compile.errors) ? compile.errors : [],
    log: compile.log ?? null };
}

/**
 * A root written from an intent carries its generation (OptiML-G): who contributed, and
 * each round's writer, where it stopped and what the gate said. Shown as its own table,
 * not among the other params.
 * @param {any} params
 */
export function generationParts(params) {
  const all = params && typeof params === "object" ? params : {};
  const { attempts, experts, ...rest } = all;
  if (!Array.isArray(attempts)) return { params: all, generation: null };
  return {
    params: rest,
    generation: {
      experts: Array.isArray(experts) ? experts.map(String) : [],
      attempts: attempts.map((a) => ({ round: Number(a?.round ?? 0), writer: String(a?.writer ?? "?"),
        stage: String(a?.stage ?? "?"), message: String(a?.message ?? "") })),
    },
  };
}


// Nsight Compute's own section names, and the metrics of ours that belong to each
// (profiling/harness/profile.py names them). Anything else is listed under "Other".
const SECTIONS = /** @type {const} */ ([
  ["GPU Speed Of Light Throughput", [["sol_sm_pct", "Compute (SM) throughput", "%"],
    ["sol_memory_pct", "Memory throughput", "%"], ["sol_dram_pct", "DRAM throughput", "%"],
    ["sol_l2_pct", "L2 cache throughput", "%"], ["sol_l1tex_pct", "L1/TEX cache throughput", "%"],
    ["duration_ns", "Duration", "ns"]]],
  ["Memory Workload Analysis", [["dram_read_bytes", "DRAM bytes read", "B"], ["dram_write_bytes", "DRAM bytes written", "B"],
    ["l1_global_load_sectors", "L1 global load sectors", ""], ["l1_global_store_sectors", "L1 global store sectors", ""]]],
  ["Occupancy", [["theoretical_occupancy_pct", "Theoretical occupancy", "%"],
    ["achieved_occupancy_pct", "Achieved occupancy", "%"], ["registers_per_thread", "Registers per thread", ""]]],
  ["Launch Statistics", [["grid_size", "Grid size", ""], ["block_size", "Block size", ""],
    ["instructions_executed", "Instructions executed", ""]]],
]);

/**
 * A node's ncu metrics grouped like Nsight Compute's sections, each row with its label,
 * value and unit ("%" rows are drawn as bars); metrics of no section go under "Other".
 * @param {Record<string, unknown>|null|undefined} metrics
 * @returns {{title: string, rows: {key: string, label: string, value: number, unit: string}[]}[]}
 */
export function profileSections(metrics) {
  const numbers = Object.fromEntries(Object.entries(metrics ?? {}).filter(([, v]) => typeof v === "number" && Number.isFinite(v)));
  const placed = new Set();
  const sections = SECTIONS.map(([title, rows]) => ({
    title,
    rows: rows.filter(([key]) => key in numbers).map(([key, label, unit]) => {
      placed.add(key);
      return { key, label, value: /** @type {number} */ (numbers[key]), unit };
    }),
  }));
  const other = Object.keys(numbers).filter((k) => !placed.has(k)).sort()
    .map((key) => ({ key, label: key, value: /** @type {number} */ (numbers[key]), unit: "" }));
  return [...sections, { title: "Other", rows: other }].filter((s) => s.rows.length);
}

/** Each metric's human name and unit (the table above; other metrics keep their id). */
/** @type {Map<string, {label: string, unit: string}>} */
const METRIC_NAMES = new Map();
for (const [, rows] of SECTIONS) for (const [key, label, unit] of rows) METRIC_NAMES.set(key, { label, unit });
// The search's own ratios beside the profile's (search/engine/reward.py ratios).
METRIC_NAMES.set("time", { label: "Time (median)", unit: "ms" });
METRIC_NAMES.set("registers", { label: "Registers per thread (ptxas)", unit: "" });

/**
 * A metric's name as people read it, with its ncu id and unit.
 * @param {string} key
 * @returns {{key: string, label: string, unit: string}}
 */
export function metricName(key) {
  const known = METRIC_NAMES.get(key);
  return { key, label: known?.label ?? key, unit: known?.unit ?? "" };
}

/**
 * A metric's value with its unit, scaled as people read it: durations in ns, µs or ms,
 * byte counts in KiB/MiB/GiB, percentages to a tenth, counts with thousands separators.
 * @param {number|null|undefined} value
 * @param {string} unit
 */
export function formatMetric(value, unit) {
  if (value == null || !Number.isFinite(value)) return "—";
  if (unit === "%") return `${value.toFixed(1)} %`;
  if (unit === "ms") return value >= 100 ? `${value.toFixed(1)} ms` : value >= 1 ? `${value.toFixed(3)} ms` : `${(value * 1000).toFixed(1)} µs`;
  if (unit === "ns") {
    if (Math.abs(value) >= 1e6) return `${(value / 1e6).toFixed(3)} ms`;
    if (Math.abs(value) >= 1e3) return `${(value / 1e3).toFixed(1)} µs`;
    return `${value.toFixed(0)} ns`;
  }
  if (unit === "B") {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0, x = value;
    while (Math.abs(x) >= 1024 && i < units.length - 1) { x /= 1024; i += 1; }
    return i ? `${x.toFixed(1)} ${units[i]}` : `${x.toFixed(0)} B`;
  }
  const text = Number.isInteger(value) ? value.toLocaleString("en-US")
    : Math.abs(value) >= 1e4 ? Math.round(value).toLocaleString("en-US") : String(Number(value.toPrecision(4)));
  return unit ? `${text} ${unit}` : text;
}

/**
 * A delta's values: this node's metric (after) and the one it is compared with (before =
 * after / ratio), both null where this node has no such metric or the ratio is unusable.
 * @param {{metric: string, ratio: number|null}} delta
 * @param {Record<string, unknown>|null|undefined} metrics this node's profile metrics
 */
export function deltaValues(delta, metrics) {
  const after = metrics?.[delta.metric];
  if (typeof after !== "number" || !Number.isFinite(after) || delta.ratio == null) return { before: null, after: null };
  return { before: after / delta.ratio, after };
}
