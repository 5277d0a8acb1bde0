// The node inspector: everything one node can say about itself.
import { deltaBars, formatPercent } from "../transforms/deltas.js";
import { deltaValues, formatMetric, inspectorModel, metricName, profileSections } from "../transforms/inspector.js";
import { format } from "../transforms/runs.js";
import { renderRoofline } from "./charts.js";
import { codeBlock, diffBlock } from "./code.js";
import { facts, fill, h, table, tabbed } from "./dom.js";

/**
 * @param {HTMLElement} container
 * @param {Record<string, any>} detail
 * @param {{row?: Record<string, any>, onSelect?: (id: number) => void}} [options]
 */
export function renderInspector(container, detail, { row, onSelect = () => {} } = {}) {
  const m = inspectorModel(detail, row);
  fill(container,
    header(m, onSelect),
    section("Proposal", [m.proposer ? h("p", { class: "proposer" }, "Proposed by ", h("code", null, m.proposer),
      m.families.length ? h("span", { class: "muted" }, ` · ${m.families.join(", ")}`) : null,
      // A node a skill card made links to the card's page (/api/skills/x/ -> /skills/x/).
      typeof detail.skill_card_url === "string" ? [" · ", h("a", { class: "skill-card-link",
        href: detail.skill_card_url.replace(/^\/api\//, "/") }, "its skill card")] : null) : null,
      m.rationale ? h("p", { class: "rationale" }, m.rationale) : h("p", { class: "muted" }, "No rationale given."),
      Object.keys(m.params).length ? h("p", { class: "params" }, Object.entries(m.params).map(([k, v]) => h("code", null, `${k}=${JSON.stringify(v)} `))) : null,
      m.duplicateOf != null ? h("p", { class: "duplicate", "data-duplicate-of": m.duplicateOf },
        "Compiles to the same binary as ", h("button", { type: "button", class: "link", onclick: () => onSelect(/** @type {number} */ (m.duplicateOf)) },
          `node #${m.duplicateOf}`), " (the cubin, and every launch at every size): its measurement is that node's, "
          + "and it is not refined, since its children would repeat that node's.")
        : m.reused ? h("p", { class: "muted" }, "Measured before in this run: reused, not evaluated again.") : null], "proposal"),
    m.generation ? generationSection(m.generation) : null,
    diagnosis(m.diagnosis, m.judgeError),
    codeTabs(m),
    deltasSection(m),
    rewardSection(m.rewardTerms),
    correctnessSection(m.correctness, m.inputsDrawn),
    timingSection(m.timing),
    rooflineSection(m),
    profileSection(m.profile),
    compileSection(m.compile),
    m.ncuReportUrl ? section("Nsight Compute", h("a", { href: m.ncuReportUrl, download: "", class: "button" },
      "Download .ncu-rep"), "ncu") : null);
  return m;
}

/** The rounds that wrote this kernel from the intent: who, where each stopped, why. */
function generationSection(generation) {
  return section("Written from the intent", [
    generation.experts.length ? h("p", null, "Contributors: ", h("code", null, generation.experts.join(", "))) : null,
    table(["round", "writer", "ended at", "the gate said"], generation.attempts.map((a) => [
      String(a.round), a.writer, a.stage, a.message || "—"]))], "generation");
}

function section(title, body, name) {
  return h("section", { class: `inspector-section ${name}`, "data-section": name }, h("h3", null, title), body);
}

function header(m, onSelect) {
  const time = m.timeMs == null ? "—" : `${format.ms(m.timeMs)} ± ${format.ms(m.spreadMs)}`;
  return h("header", { class: "inspector-header" },
    h("h2", null, `#${m.id} `, h("span", { class: "node-title" }, m.title || "(untitled)")),
    h("p", null, h("span", { class: `badge status-${m.status ?? m.state}` }, m.status === "error" ? "not measured" : m.status ?? m.state ?? "pending"),
      m.guard ? h("span", { class: "badge guard" }, `guard: ${m.guard}`) : null,
      m.replayed ? h("span", { class: "badge replayed", title: "a recorded measurement, not measured now" }, "replayed") : null,
      m.level === "screen" ? h("span", { class: "badge screened", title: "measured by the screen only (fewer seeds and timed runs, no profile): never a run's best" }, "screened (not profiled)") : null,
      m.promotedFromScreen?.time_ms != null ? h("span", { class: "badge promoted", title: "the screen found it faster than the best, so the full gate measured it again" },
        `screen: ${format.ms(m.promotedFromScreen.time_ms)}`) : null,
      m.parentId != null ? h("button", { type: "button", class: "link", onclick: () => onSelect(m.parentId) }, `parent #${m.parentId}`) : null),
    facts([["time", time], ["reward", format.number(m.reward)], ["visits", m.visits],
      ["value", format.number(m.value)], ["prior", format.number(m.prior)]]),
    m.screenNote ? h("p", { class: "screen-note", "data-screen-note": "" }, m.screenNote) : null,
    m.message && !m.diagnosis ? h("p", { class: "message" }, m.message) : null);
}

function diagnosis(d, judgeError) {
  const failure = judgeError ? h("p", { class: "error" }, `The judge failed: ${typeof judgeError === "string" ? judgeError : JSON.stringify(judgeError)}`) : null;
  if (!d) return section("Diagnosis", [failure, h("p", { class: "muted" }, "Not diagnosed (pending, or the root's profile is missing).")], "diagnosis");
  return section("Diagnosis", [failure,
    h("p", null, h("span", { class: "badge bottleneck" }, d.bottleneck ?? "unknown"), " ", d.summary ?? "",
      d.source ? h("span", { class: "muted" }, ` — ${d.source}`) : null),
    d.evidence?.length ? [h("h4", null, "Evidence"), h("ul", { class: "evidence" }, d.evidence.map((e) => h("li", null, e)))] : null,
    d.wants?.length ? [h("h4", null, "Wants"), h("ul", { class: "wants" }, d.wants.map((w) => h("li", null, typeof w === "string" ? w : JSON.stringify(w))))] : null,
  ], "diagnosis");
}

function codeTabs(m) {
  /** @type {Array<[string, string, () => Node|string]>} */
  const tabs = [
    ["diff-parent", "Diff vs parent", () => diffBlock(m.diffVsParent)],
    ["diff-root", "Diff vs root", () => diffBlock(m.diffVsRoot)],
    ["source", "Source", () => (m.code ? codeBlock(m.code) : h("p", { class: "muted" }, "No source."))],
    ["plan", "Launch plan", () => h("pre", { class: "plan" }, m.plan ? JSON.stringify(m.plan, null, 2) : "—")],
  ];
  return section("Kernel", tabbed(tabs, m.diffVsParent ? "diff-parent" : "source"), "code");
}

function deltasSection(m) {
  const body = h("div");
  const draw = (which) => {
    const deltas = which === "root" ? m.deltasVsRoot : m.deltasVsParent;
    if (!deltas.length) {
      const why = m.parentId == null ? "This is the starting kernel: there is nothing to compare it with."
        : `No metric deltas: this node or its ${which === "root" ? "root" : "parent"} has no measurement to compare.`;
      return fill(body, h("p", { class: "muted" }, why));
    }
    const bars = deltaBars(deltas);
    const metrics = { ...(m.profile?.metrics ?? {}), time: m.timing?.medianMs };
    fill(body, table(["metric", `${which === "root" ? "root" : "parent"} → this node`, "change", ""], deltas.map((d, i) => {
      const name = metricName(d.metric);
      const { before, after } = deltaValues(d, metrics);
      return [h("span", { title: `ncu: ${d.metric}` }, name.label),
        after == null ? "—" : `${formatMetric(before, name.unit)} → ${formatMetric(after, name.unit)}`, formatPercent(d.percent),
      h("span", { class: "delta-bar-track" }, h("span", { class: `delta-bar ${bars[i].direction}${bars[i].clipped ? " clipped" : ""}`,
        style: { width: `${(bars[i].length / 2).toFixed(1)}%` } })),
      ];
    }), { class: "deltas" }));
  };
  const select = h("select", { "aria-label": "compare with", onchange: (e) => draw(e.target.value) },
    h("option", { value: "parent" }, "vs parent"), h("option", { value: "root" }, "vs root"));
  draw("parent");
  return section("Metric deltas", [select, body], "deltas");
}

function rewardSection(terms) {
  if (!terms.length) return null;
  return section("Reward terms", table(["term", "value"], terms.map(([k, v]) => [k, format.number(v)])), "reward");
}

function correctnessSection(rows, inputsDrawn) {
  if (!rows.length) return section("Correctness", h("p", { class: "muted" }, "No correctness checks ran."), "correctness");
  return section("Correctness", [table(["level", "sizes", "seed", "inputs", "result", "max |error|"], rows.map((r) => [
    r.level, Object.entries(r.sizes ?? {}).map(([k, v]) => `${k}=${v}`).join(", "), String(r.seed ?? "—"), r.distribution ?? "—",
    h("span", { class: r.passed ? "pass" : "fail", title: r.detail || "" }, r.passed ? "passed" : `failed${r.guard ? ` (${r.guard})` : ""}`),
    format.number(r.max_abs_error),
  ]), { class: "correctness" }),
  inputsDrawn ? h("p", { class: "muted inputs-drawn" }, `Inputs: ${inputsDrawn}.`) : null], "correctness");
}

function timingSection(t) {
  if (!t) return section("Timing", h("p", { class: "muted" }, "Not timed (rejected before its timed runs, or not measured)."), "timing");
  return section("Timing", [
    facts([["median", format.ms(t.medianMs)], ["p10–p90", `${format.ms(t.p10Ms)} – ${format.ms(t.p90Ms)}`],
      ["timed runs", t.runs ?? "—"], ["verified", t.spotChecks ?? "—"], ["floor", format.ms(t.floorMs)]]),
    t.floorReason ? h("p", { class: "muted floor-reason" }, `Physics floor: ${t.floorReason}.`) : null,
    h("p", { class: "muted references" }, `References of the verified runs: ${t.references}.`)], "timing");
}

function rooflineSection(m) {
  if (!m.roofline) return section("Roofline", h("p", { class: "muted" }, m.rooflineProblem ?? "No roofline."), "roofline");
  const holder = h("div", { class: "roofline-holder" });
  renderRoofline(holder, m.roofline);
  const r = m.roofline;
  return section("Roofline", [holder, h("p", { class: "muted" },
    `${format.number(r.point.x)} FLOP/byte: ${r.bound}-bound, ${(r.efficiency * 100).toFixed(0)}% of the attainable ` +
    `${format.rate(r.attainable, "FLOP/s")}${r.source ? ` (ceilings: ${r.source})` : ""}.`),
  ...(r.levels.length ? [h("p", { class: "muted roofline-levels" }, "Measured by this node's counters, against its GPU's own ceilings: " +
    r.levels.map((l) => `${l.level} ${format.number(l.x)} FLOP/byte under ${format.rate(l.bandwidth, "B/s")}`).join("; ") + ".")] : [])],
  "roofline");
}

function compileSection(compile) {
  if (!compile) return null;
  const errors = compile.errors.map((e) => (typeof e === "string" ? e : e.line != null ? `line ${e.line}: ${e.message ?? JSON.stringify(e)}` : JSON.stringify(e)));
  return section("Compile resources", [
    compile.ok === false ? h("p", { class: "error" }, "Did not compile.") : null,
    compile.kernels.length ? table(["kernel", "registers", "spill st/ld", "shared (static)", "stack"], compile.kernels.map((k) => [
      h("code", null, k.kernel), k.registers ?? "—", `${format.bytes(k.spill_store_bytes)} / ${format.bytes(k.spill_load_bytes)}`,
      format.bytes(k.shared_static_bytes), format.bytes(k.stack_frame_bytes),
    ]), { class: "compile" }) : null,
    errors.length ? h("ul", { class: "compile-errors" }, errors.map((e) => h("li", null, h("code", null, e)))) : null,
    compile.log ? h("details", null, h("summary", null, `ptxas log${compile.seconds != null ? ` (${format.seconds(compile.seconds)}${compile.cached ? ", cached" : ""})` : ""}`),
      h("pre", { class: "plan" }, compile.log)) : null,
  ], "compile");
}

function profileSection(profile) {
  const sections = profileSections(profile?.metrics);
  if (!sections.length) return null;
  return section("Profile (Nsight Compute)", [
    profile.bottleneck ? h("p", null, "Bottleneck: ", h("span", { class: "badge bottleneck" }, profile.bottleneck)) : null,
    sections.map((s, i) => h("details", { class: "ncu-section", "data-ncu-section": s.title, open: i === 0 },
      h("summary", null, s.title),
      table(["metric", "value"], s.rows.map((r) => [h("span", { title: `ncu: ${r.key}` }, r.label), r.unit === "%"
        // a <meter>, not a styled bar: the Content-Security-Policy allows no inline style
        ? h("span", { class: "pct" }, h("meter", { min: 0, max: 100, value: Math.max(0, Math.min(100, r.value)) }),
          ` ${r.value.toFixed(1)} %`)
        : formatMetric(r.value, r.unit)]), { class: "metrics" }))),
  ], "profile");
}
