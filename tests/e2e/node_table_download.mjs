// The browser half of test_node_table_download.py: the node table's CSV and JSON links on a
// run's page, on its share link's page signed out, and on the compare page, each clicked
// and its file read. Prints "RESULT <json>"; exits non-zero on the first failure.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { BASE, env, launch, signIn, WAIT_MS } from "./browser.mjs";

const [a, b] = env("RUN_IDS").split(",");
const browser = await launch();
const result = { page_errors: [] };

/** Click a download link; the file's name and text. */
async function download(page, selector) {
  const [file] = await Promise.all([page.waitForEvent("download", { timeout: WAIT_MS }), page.click(selector)]);
  return { name: file.suggestedFilename(), text: await readFile(await file.path(), "utf-8") };
}

try {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 }, acceptDownloads: true });
  const page = await context.newPage();
  page.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(page, `/runs/${a}/`, new RegExp(`/runs/${a}/$`));
  await page.locator('.node-table-panel a[data-download="csv"]').waitFor({ timeout: WAIT_MS });
  await page.locator(".node-table-panel .node-downloads").scrollIntoViewIfNeeded();
  await page.screenshot({ path: join(env("SHOTS_DIR"), "node-table-downloads.png") });
  result.run_csv = await download(page, '.node-table-panel a[data-download="csv"]');
  result.run_json = await download(page, '.node-table-panel a[data-download="json"]');
  result.run_table_rows = await page.locator("table.node-table tbody tr").count();

  await page.goto(`${BASE}/runs/compare/?a=${a}&b=${b}`);
  await page.locator('.compare-side[data-side="b"] a[data-download="csv"]').waitFor({ timeout: WAIT_MS });
  result.compare_curves = await page.locator("svg.curves g.curve").evaluateAll((gs) => gs.map((g) => g.getAttribute("data-label")));
  result.compare_settings = await page.locator(".settings-table tbody tr[data-setting]").evaluateAll((rows) =>
    rows.map((row) => [row.getAttribute("data-setting"), row.getAttribute("data-differs"),
      ...[...row.querySelectorAll("td")].slice(0, 2).map((td) => td.textContent)]));
  await page.screenshot({ path: join(env("SHOTS_DIR"), "compare-downloads.png"), fullPage: true });
  result.compare_a_csv = await download(page, '.compare-side[data-side="a"] a[data-download="csv"]');
  result.compare_b_json = await download(page, '.compare-side[data-side="b"] a[data-download="json"]');

  const stranger = await browser.newContext({ acceptDownloads: true });
  const shared = await stranger.newPage();
  shared.on("pageerror", (error) => result.page_errors.push(`shared: ${error.message}`));
  await shared.goto(`${BASE}/share/${env("SHARE_TOKEN")}/`);
  await shared.locator('.node-table-panel a[data-download="csv"]').waitFor({ timeout: WAIT_MS });
  result.shared_csv = await download(shared, '.node-table-panel a[data-download="csv"]');
} finally {
  await browser.close();
}
console.log(`RESULT ${JSON.stringify(result)}`);
