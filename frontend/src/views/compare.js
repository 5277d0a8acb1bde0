// Two runs side by side (/runs/compare/?a=<id>&b=<id>): how each ended, its best path
// step by step with times, their settings and best kernels' tunables in one table (the
// rows that differ marked), both best-so-far curves over each other (log time), each one's node table as CSV and JSON (the run page's
// downloads), and the diff from run a's best kernel to run b's (diff2html, as the skill
// cards' pages use).
import { html as diffHtml } from "diff2html";
import "diff2html/bundles/css/diff2html.min.css";
import { api } from "../api.js";
import { format, statusLabel } from "../transforms/runs.js";
import { differencesText, settingLines } from "../transforms/settingsTable.js";
import { compareCurves } from "../transforms/timeline.js";
import { renderCurves } from "./charts.js";
import { facts, fill, h, table } from "./dom.js";

/** @param {HTMLElement} root */
export async function mountCompare(root) {
  const query = new URLSearchParams(window.location.search);
  const a = query.get("a"), b = query.get("b");
  if (!a || !b) {
    fill(root, h("h1", null, "Compare runs"),
      h("p", null, "Pick two runs in the ", h("a", { href: "/runs/" }, "runs list"), " and press Compare."));
    return;
  }
  const data = await api(`/api/runs/compare/?a=${encodeURIComponent(a)}&b=${encodeURIComponent(b)}`);
  const curves = h("div", { class: "compare-curves" });
  renderCurves(curves, compareCurves([data.a, data.b]));
  fill(root, h("h1", null, `Run #${data.a.id} and run #${data.b.id}`),
    data.same_task ? null : h("p", { class: "notice" }, `Different tasks (${data.a.task} and ${data.b.task}): `
      + "their times are not comparable."),
    h("div", { class: "compare-grid" }, side(data.a, "a"), side(data.b, "b")),
    data.settings ? settingsPanel(data) : null,
    h("section", { class: "panel" }, h("h2", null, "Best time so far, by evaluation"), curves),
    h("section", { class: "panel" }, h("h2", null, `Best kernel of #${data.a.id} → best kernel of #${data.b.id}`),
      data.diff ? h("div", { class: "compare-diff", html: diffHtml(data.diff, { outputFormat: "side-by-side", drawFileList: false }) })
        : h("p", { class: "muted", "data-compare": "same" }, "The two best kernels are the same.")));
}

/** @param {any} run @param {string} which */
function side(run, which) {
  return h("section", { class: "panel compare-side", "data-side": which },
    h("h2", null, h("a", { href: `/runs/${run.id}/` }, `#${run.id}`), ` ${run.task} `,
      h("span", { class: `badge status-${run.status} outcome-${run.outcome || "none"}` }, statusLabel(run))),
    run.intent ? h("p", null, h("span", { class: "muted" }, "Intent: "), run.intent) : null,
    facts([["judge", run.judge], ["root", format.ms(run.root_ms)], ["best", format.ms(run.best_ms)],
      ["speedup", format.speedup(run.speedup)], ["evaluated", `${run.evaluated} / ${run.budget}`],
      ["best found at", run.best_found_at == null ? "—" : `evaluation ${run.best_found_at}`],
      ["GPU time", format.seconds(run.gpu_seconds)], ["sources", (run.sources ?? []).join(", ")]]),
    h("p", { class: "node-downloads" }, "Node table: ",
      h("a", { href: `/api/runs/${run.id}/nodes.csv`, download: "", "data-download": "csv" }, "CSV"), " · ",
      h("a", { href: `/api/runs/${run.id}/nodes.json`, download: "", "data-download": "json" }, "JSON")),
    h("h3", null, "Best path"),
    table(["node", "step", "by", "time"], run.path.map((/** @type {any} */ step, /** @type {number} */ i) => [
      `#${step.id}`, i === 0 ? "start" : step.title, h("code", null, step.source), format.ms(step.time_ms)]),
    { class: "compare-path" }));
}

/** The settings and the best kernels' tunables, side by side. @param {any} data */
function settingsPanel(data) {
  const lines = settingLines(data.settings);
  const row = (/** @type {import("../transforms/settingsTable.js").SettingLine} */ line) =>
    h("tr", { class: line.differs ? "differs" : null, "data-setting": line.name, "data-group": line.group,
      "data-differs": line.differs ? "yes" : "no" },
    h("th", { scope: "row" }, line.name), ...line.cells.map((cell) => h("td", null, cell)),
    h("td", { class: "differs-mark", title: line.differs ? "the runs differ here" : "" }, line.differs ? "≠" : ""));
  const group = (/** @type {string} */ name, /** @type {string} */ title) => [
    h("tr", { class: "group" }, h("th", { colspan: 4, scope: "rowgroup" }, title)),
    ...lines.filter((line) => line.group === name).map(row)];
  return h("section", { class: "panel compare-settings" }, h("h2", null, "Settings and tunables"),
    h("p", { class: "muted", "data-differences": "" }, differencesText(lines)),
    h("table", { class: "settings-table" },
      h("thead", null, h("tr", null, h("th", { scope: "col" }, ""), h("th", { scope: "col" }, `#${data.a.id}`),
        h("th", { scope: "col" }, `#${data.b.id}`), h("th", { scope: "col" }, ""))),
      h("tbody", null, ...group("settings", "Settings"),
        ...group("tunables", `Best kernels' tunables (nodes #${data.a.best_node} and #${data.b.best_node})`))));
}
