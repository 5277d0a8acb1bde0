// The runs list: filters (task, status, mine) kept in the URL, a summary, a table.
import { api, ApiError } from "../api.js";
import { fieldErrors } from "../transforms/forms.js";
import { filtersFromQuery, format, RUN_STATUSES, runsQuery, runsSummary, statusLabel } from "../transforms/runs.js";
import { cards, fill, h } from "./dom.js";

const REFRESH_MS = 5000; // while any listed run is running

/** @param {HTMLElement} root */
export async function mountRuns(root) {
  const filters = filtersFromQuery(new URLSearchParams(window.location.search));
  const tasks = await api("/api/tasks/");
  const taskSelect = h("select", { name: "task", id: "filter-task" }, h("option", { value: "" }, "all tasks"),
    tasks.map((t) => h("option", { value: t.name, selected: t.name === filters.task }, t.name)));
  const statusSelect = h("select", { name: "status", id: "filter-status" }, h("option", { value: "" }, "any status"),
    RUN_STATUSES.map((s) => h("option", { value: s, selected: s === filters.status }, s)));
  const mine = h("input", { type: "checkbox", name: "mine", id: "filter-mine", checked: filters.mine });
  const summary = h("div", { class: "runs-summary" });
  const list = h("div", { class: "runs-table" });
  const form = h("form", { class: "filters", onchange: () => load(), onsubmit: (e) => { e.preventDefault(); load(); } },
    h("label", { for: "filter-task" }, "Task "), taskSelect,
    h("label", { for: "filter-status" }, "Status "), statusSelect,
    h("label", null, mine, " mine only"),
    h("a", { class: "button primary", href: "/runs/new/" }, "New session"));
  const importMessage = h("span", { class: "import-message", role: "status" });
  const importInput = /** @type {HTMLInputElement} */ (h("input", { type: "file", id: "import-run", accept: ".json,application/json",
    onchange: () => importRun() }));
  const importer = h("p", { class: "importer" }, h("label", { for: "import-run" }, "Import an exported run (.json): "), importInput, " ", importMessage);
  const compare = /** @type {HTMLButtonElement} */ (h("button", { type: "button", id: "compare-runs", disabled: true,
    onclick: () => {
      const [a, b] = picked();
      window.location.assign(`/runs/compare/?a=${a}&b=${b}`);
    } }, "Compare the two checked"));
  const picked = () => [...list.querySelectorAll("input.pick:checked")].map((box) => /** @type {HTMLInputElement} */ (box).value);
  list.addEventListener("change", () => { compare.disabled = picked().length !== 2; });
  fill(root, h("h1", null, "Runs"), form, summary, h("p", { class: "compare-bar" }, compare), list, importer);

  async function importRun() {
    const file = importInput.files?.[0];
    if (!file) return;
    fill(importMessage, "Importing…");
    try {
      const run = await api("/api/runs/import/", { method: "POST", body: JSON.parse(await file.text()) });
      window.location.assign(`/runs/${run.id}/`);
    } catch (error) {
      // With no known fields, every field's messages come back as "field: message".
      const problems = error instanceof ApiError && error.status === 400 ? fieldErrors(error.body, []).general
        : [error instanceof SyntaxError ? `not JSON: ${error.message}` : error.message];
      fill(importMessage, h("span", { class: "error" }, `Could not import ${file.name}: ${problems.join("; ")}`));
    }
  }

  let timer = 0;
  async function load() {
    const current = { task: /** @type {HTMLSelectElement} */ (taskSelect).value,
      status: /** @type {HTMLSelectElement} */ (statusSelect).value, mine: /** @type {HTMLInputElement} */ (mine).checked };
    const query = runsQuery(current);
    history.replaceState(null, "", `${window.location.pathname}${query}`);
    let runs;
    try {
      runs = await api(`/api/runs/${query}`);
    } catch (error) {
      fill(list, h("p", { class: "error" }, `Could not load runs: ${error.message}`));
      return;
    }
    drawSummary(runs);
    drawTable(runs);
    clearTimeout(timer);
    if (runs.some((r) => r.status === "running")) timer = window.setTimeout(load, REFRESH_MS);
  }

  function drawSummary(runs) {
    const s = runsSummary(runs);
    fill(summary, cards([["runs", s.count], ...Object.entries(s.byStatus).map(([k, v]) => [k, v]),
      ["best speedup", format.speedup(s.bestSpeedup)], ["evaluations", s.evaluations], ["GPU time", format.seconds(s.gpuSeconds)]]));
  }

  function drawTable(runs) {
    const kept = new Set(picked()); // the refresh keeps what was checked
    if (!runs.length) return fill(list, h("p", { class: "muted" }, "No runs match. ", h("a", { href: "/runs/new/" }, "Start one.")));
    fill(list, h("table", { class: "runs" },
      h("thead", null, h("tr", null, ["", "run", "task", "status", "why", "judge", "progress", "root", "best", "speedup", "GPU time", "created", "by"]
        .map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", null, runs.map((r) => h("tr", { "data-run-id": r.id },
        h("td", null, h("input", { type: "checkbox", class: "pick", value: String(r.id), "aria-label": `compare run ${r.id}`,
          checked: kept.has(String(r.id)) })),
        h("td", null, h("a", { href: `/runs/${r.id}/` }, `#${r.id}`)),
        h("td", null, r.task, r.demo ? [" ", h("span", { class: "badge demo", title: r.demo.banner ?? "" }, "demo")] : null),
        h("td", null, h("span", { class: `badge status-${r.status} outcome-${r.outcome || "none"}` }, statusLabel(r))),
        h("td", { class: "run-message muted" }, r.message ?? ""),
        h("td", null, r.judge),
        h("td", null, h("progress", { max: r.budget || 1, value: r.evaluated ?? 0 }), ` ${r.evaluated ?? 0}/${r.budget}`),
        h("td", { class: "num" }, format.ms(r.root_ms)),
        h("td", { class: "num" }, format.ms(r.best_ms)),
        h("td", { class: "num" }, format.speedup(r.speedup)),
        h("td", { class: "num" }, format.seconds(r.gpu_seconds)),
        h("td", null, r.created ? new Date(r.created).toLocaleString() : "—"),
        h("td", null, r.created_by ?? "—"))))));
    compare.disabled = picked().length !== 2;
  }

  await load();
}
