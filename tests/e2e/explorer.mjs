// The browser half of tests/e2e/test_explorer.py: playwright-core driving Debian's
// Chromium. Prints progress lines, "RUN_CREATED <id>" when the run exists (the test then
// drives it), and "RESULT <json>" with what it saw; exits non-zero on the first failure.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { BASE, env, launch, WAIT_MS } from "./browser.mjs";

const SHOTS = env("SHOTS_DIR");
mkdirSync(SHOTS, { recursive: true });

const log = (...parts) => console.log(...parts);
function check(condition, message) {
  if (!condition) throw new Error(`check failed: ${message}`);
}

const browser = await launch();
const pageErrors = [];
const result = {};
try {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const page = await context.newPage();
  watch(page, "signed in");

  log("sign in");
  await page.goto(`${BASE}/runs/`);
  check(page.url().includes("/accounts/login/"), `a signed-out visit to /runs/ goes to the login page, got ${page.url()}`);
  await page.fill("input[name=username]", env("E2E_USER"));
  await page.fill("input[name=password]", env("E2E_PASSWORD"));
  await Promise.all([page.waitForURL(/\/runs\/$/), page.click("main form button[type=submit]")]);
  await ready(page);
  await shot(page, "runs");

  log("new session form");
  await page.goto(`${BASE}/runs/new/`);
  await ready(page);
  await page.selectOption("#id_task", "relu");
  const naiveSource = await page.inputValue("#id_source");
  const naivePlan = await page.inputValue("#id_plan");
  check(naiveSource.includes("relu"), "choosing relu fills in its naive kernel");
  check(naivePlan.includes('"launches"'), "choosing relu fills in its naive plan");
  await page.fill("#id_intent", "relu over 2^28 floats");
  result.highlighted_tokens = await page.locator(".code-editor-highlight .tok-cuda").count();
  const uploaded = `// uploaded from disk\n${naiveSource}`;
  await page.setInputFiles("#id_upload", { name: "relu.cu", mimeType: "text/plain", buffer: Buffer.from(uploaded) });
  await page.waitForFunction((text) => document.querySelector("#id_source").value === text, uploaded, { timeout: WAIT_MS });
  result.upload_filled_source = true;
  await page.fill("#id_source", naiveSource); // the recording is of the naive kernel itself

  await page.fill("#id_plan", '{"launches": [');
  await page.click("form.new-run button[type=submit]");
  result.client_error = await page.locator("#errors-plan li").first().textContent({ timeout: WAIT_MS });

  // The browser lets any whole budget through; the server caps it (10,000 evaluations).
  await page.fill("#id_plan", naivePlan);
  await page.fill("#id_budget", "20000");
  await page.click("form.new-run button[type=submit]");
  const serverError = page.locator(".field-errors li").first();
  await serverError.waitFor({ timeout: WAIT_MS });
  result.server_error = await serverError.textContent();
  result.server_error_field = await serverError.evaluate((li) => li.parentElement?.dataset.errorsFor ?? null);
  result.kept_after_errors = (await page.inputValue("#id_plan")) === naivePlan
    && (await page.inputValue("#id_budget")) === "20000"
    && (await page.inputValue("#id_source")) === naiveSource
    && (await page.inputValue("#id_intent")) === "relu over 2^28 floats";
  await shot(page, "new-run-errors");

  log("start the run");
  await page.fill("#id_budget", "6");
  await page.fill("#id_parallel", "2"); // two evaluations at a time
  await Promise.all([page.waitForURL(/\/runs\/\d+\/$/, { timeout: WAIT_MS }), page.click("main form button[type=submit]")]);
  const runId = Number(/\/runs\/(\d+)\/$/.exec(page.url())[1]);
  await ready(page);
  // Show every node (failed ones too) so that each new node is a new element.
  await page.uncheck(".toolbar input[type=checkbox]");
  log(`RUN_CREATED ${runId}`);

  log("watch the tree grow");
  const seen = [];
  let liveShot = false;
  const started = Date.now();
  for (;;) {
    const count = await page.locator("svg.tree g.node").count();
    if (seen[seen.length - 1] !== count) seen.push(count);
    if (!liveShot && count >= 3) {
      await shot(page, "run-live");
      liveShot = true;
    }
    if (!("paused_badge" in result) && count >= 3) await pauseAndResume(page);
    const status = await page.getAttribute("[data-run-status]", "data-run-status");
    if (status === "finished" || status === "stopped" || status === "failed") break;
    check(Date.now() - started < WAIT_MS * 2, `the run finishes (status ${status}, sizes ${seen})`);
    await page.waitForTimeout(100);
  }
  await page.waitForTimeout(500); // the final refresh after run_finished
  result.node_counts_seen = seen;
  result.final_status = await page.getAttribute("[data-run-status]", "data-run-status");
  result.evaluated = Number(await page.getAttribute(".progress-text", "data-evaluated"));
  result.final_node_count = await page.locator("svg.tree g.node").count();
  result.header_message = await page.locator("[data-run-message]").textContent({ timeout: WAIT_MS });
  result.header_badge = await page.locator("[data-run-status]").textContent();
  result.header_outcome = await page.getAttribute("[data-run-status]", "data-outcome");
  const api = await page.request.get(`${BASE}/api/runs/${runId}/`);
  result.run_parallel = (await api.json()).parallel;
  await page.click(".toolbar button:has-text('Fit')");
  await shot(page, "run-finished");

  log("inspect a child");
  await page.click('svg.tree g.node[data-id="1"] circle');
  await page.waitForSelector('.inspector[data-node-id="1"]', { timeout: WAIT_MS });
  result.child_diff_added = await page.locator(".inspector .diff-add").count();
  result.child_diff_removed = await page.locator(".inspector .diff-del").count();
  result.child_diff_text = await page.locator(".inspector .diff").textContent();
  result.child_title = await page.locator(".inspector h2, .inspector h3").first().textContent();
  result.child_deltas_text = await page.locator('.inspector [data-section="deltas"]').textContent();
  await shot(page, "inspector-child");

  log("inspect the root");
  await page.click('svg.tree g.node[data-id="0"] circle');
  await page.waitForSelector('.inspector[data-node-id="0"]', { timeout: WAIT_MS });
  await page.selectOption(".inspector .deltas select", "root");
  result.root_deltas_text = await page.locator('.inspector [data-section="deltas"]').textContent();
  result.root_correctness_rows = await page.locator(".inspector table.correctness tbody tr").count();
  result.root_has_roofline = (await page.locator(".inspector svg.roofline circle.kernel-point").count()) === 1;
  result.root_timing_text = await page.locator('.inspector [data-section="timing"]').textContent();
  result.ncu_sections = await page.locator(".inspector details.ncu-section > summary").allTextContents();
  await page.locator('.inspector [data-section="roofline"]').scrollIntoViewIfNeeded();
  await shot(page, "inspector-root");

  log("node table and chart");
  result.table_rows = await page.locator("table.node-table tbody tr").count();
  await page.fill("input.node-search", "#1");
  await page.waitForFunction(() => [...document.querySelectorAll("table.node-table tbody tr")]
    .every((tr) => tr.getAttribute("data-node-id")?.startsWith("1")), null, { timeout: WAIT_MS });
  result.searched_ids = await page.locator("table.node-table tbody tr").evaluateAll((trs) => trs.map((tr) => tr.dataset.nodeId));
  await page.click('table.node-table tr[data-node-id="1"]');
  await page.waitForSelector('.inspector[data-node-id="1"]', { timeout: WAIT_MS });
  result.table_selects = await page.locator('table.node-table tr.selected[data-node-id="1"]').count();
  await page.fill("input.node-search", "");
  await page.click('table.node-table button[data-sort="time_ms"]');
  result.sorted_times = await page.locator("table.node-table tbody tr td:nth-child(2)").allTextContents();
  result.chart_references = await page.locator("svg.timeline text.reference-label").allTextContents();
  result.chart_axis = await page.locator("svg.timeline g.axis.y .axis-label").textContent();
  await shot(page, "node-table");

  log("share");
  await page.click('[data-action="share"]');
  result.share_url = await page.locator("input.share-url").inputValue({ timeout: WAIT_MS });

  log("open the link signed out");
  const stranger = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  const shared = await stranger.newPage();
  watch(shared, "shared");
  await shared.goto(result.share_url);
  await ready(shared);
  await shared.uncheck(".toolbar input[type=checkbox]");
  await shared.waitForFunction((n) => document.querySelectorAll("svg.tree g.node").length === n, result.final_node_count, { timeout: WAIT_MS });
  result.shared_node_count = await shared.locator("svg.tree g.node").count();
  result.shared_controls = await shared.locator("[data-action]").count();
  await shared.click('svg.tree g.node[data-id="0"] circle');
  await shared.waitForSelector('.inspector[data-node-id="0"]', { timeout: WAIT_MS });
  result.shared_inspector_title = await shared.locator(".inspector-header h2").textContent();
  await shot(shared, "shared");
  await shared.goto(`${BASE}/runs/`);
  result.signed_out_runs_redirects_to_login = shared.url().includes("/accounts/login/");

  log("export the run and import it from the runs list");
  const exported = await page.request.get(`${BASE}/api/runs/${runId}/export/`);
  check(exported.ok(), `the export answers ${exported.status()}`);
  await page.goto(`${BASE}/runs/`);
  await ready(page);
  result.runs_listed = await page.locator("table.runs tbody tr").count();
  result.listed_message = await page.locator(`table.runs tr[data-run-id="${runId}"] td.run-message`).textContent();
  await Promise.all([page.waitForURL((url) => /\/runs\/\d+\/$/.test(url.pathname) && !url.pathname.endsWith(`/${runId}/`), { timeout: WAIT_MS }),
    page.setInputFiles("#import-run", { name: "run.json", mimeType: "application/json", buffer: await exported.body() })]);
  await ready(page);
  await page.uncheck(".toolbar input[type=checkbox]");
  result.imported_node_count = await page.locator("svg.tree g.node").count();
  result.imported_notice = await page.locator(".imported-notice").textContent();
  result.imported_badge = await page.locator("[data-imported]").count();
  result.imported_progress = await page.locator(".progress-text").textContent();
  result.imported_intent = await page.locator("[data-run-intent]").textContent();
  result.imported_controls = await page.locator('[data-action="pause"]').count();
  await page.click('[data-action="share"]');
  result.imported_share_url = await page.locator("input.share-url").inputValue({ timeout: WAIT_MS });
  await shot(page, "imported");

  log("compare the run with its import");
  await page.goto(`${BASE}/runs/`);
  await ready(page);
  for (const box of await page.locator("input.pick").all()) await box.check();
  await Promise.all([page.waitForURL(/\/runs\/compare\/\?a=\d+&b=\d+$/, { timeout: WAIT_MS }), page.click("#compare-runs")]);
  await ready(page);
  result.compare_sides = await page.locator(".compare-side").count();
  result.compare_paths = await page.locator(".compare-side table.compare-path").evaluateAll((tables) =>
    tables.map((t) => [...t.querySelectorAll("tbody tr td:first-child")].map((td) => td.textContent)));
  result.compare_same = await page.locator("p[data-compare=same]").allTextContents();
  await shot(page, "compare");
  result.page_errors = pageErrors;
  log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}

/** Pause: the badge says so and the tree stops growing; resume: it goes on. */
async function pauseAndResume(page) {
  log("pause and resume");
  await page.click('[data-action="pause"]');
  await page.waitForSelector('[data-run-status="paused"]', { timeout: WAIT_MS });
  result.paused_badge = await page.getAttribute("[data-run-status]", "data-run-status");
  await page.waitForTimeout(1500); // a step already under way may still land
  const before = await page.locator("svg.tree g.node").count();
  await page.waitForTimeout(2000); // several of the driver's steps
  result.grew_while_paused = (await page.locator("svg.tree g.node").count()) !== before;
  check(await page.isEnabled('[data-action="resume"]'), "Resume is enabled on a paused run");
  await page.click('[data-action="resume"]');
  await page.waitForSelector('[data-run-status="running"], [data-run-status="finished"]', { timeout: WAIT_MS });
  result.resumed_badge = await page.getAttribute("[data-run-status]", "data-run-status");
}

function watch(page, label) {
  page.on("pageerror", (error) => pageErrors.push(`${label}: ${error.message}`));
  page.on("console", (message) => {
    if (message.type() === "error") log(`console error (${label}): ${message.text()}`);
  });
}

/** The front end marks #app once its page is drawn: "true", or "error" with a message. */
async function ready(page) {
  const app = page.locator("#app[data-ready]");
  await app.waitFor({ timeout: WAIT_MS });
  const state = await app.getAttribute("data-ready");
  if (state !== "true") throw new Error(`the page failed to start: ${await app.textContent()}`);
}

async function shot(page, name) {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}
