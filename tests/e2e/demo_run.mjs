// The browser half of test_demo_run.py: on a server no GPU worker has measured for, New
// session picks "Demo" for relu (which has a recording) and says so; softmax (none) stays
// on the GPU worker, and asking a demo of it says which tasks have one; the demo run's page
// carries the banner with the GPU and date. Prints "RESULT <json>"; exits non-zero on the
// first failure.
import { join } from "node:path";
import { env, launch, signIn, WAIT_MS } from "./browser.mjs";

const browser = await launch();
const result = { page_errors: [] };
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  page.on("pageerror", (error) => result.page_errors.push(error.message));
  await signIn(page, "/runs/new/?task=relu", /\/runs\/new\/\?task=relu$/);
  await page.waitForFunction(() => document.querySelector("#id_source").value.includes("fmaxf"), null,
    { timeout: WAIT_MS });
  result.relu_default = await page.inputValue("#id_evaluator");
  result.relu_hint = await page.locator("#evaluator-hint").textContent();
  result.budget_disabled = await page.isDisabled("#id_budget");
  await page.screenshot({ path: join(env("SHOTS_DIR"), "demo-new-session.png"), fullPage: true });

  await page.selectOption("#id_task", "softmax");
  result.softmax_default = await page.inputValue("#id_evaluator");
  await page.selectOption("#id_evaluator", "demo");
  result.softmax_demo_hint = await page.locator("#evaluator-hint").textContent();

  await page.selectOption("#id_task", "relu");
  await page.waitForFunction(() => document.querySelector("#id_source").value.includes("fmaxf"), null,
    { timeout: WAIT_MS });
  await Promise.all([page.waitForURL(/\/runs\/\d+\/$/, { timeout: WAIT_MS }),
    page.click("form.new-run button[type=submit]")]);
  result.run_id = Number(/\/runs\/(\d+)\/$/.exec(page.url())[1]);
  const banner = page.locator("[data-demo]");
  await banner.waitFor({ timeout: WAIT_MS });
  result.banner = await banner.textContent();
  await page.screenshot({ path: join(env("SHOTS_DIR"), "demo-run-banner.png"), fullPage: true });
} finally {
  await browser.close();
}
console.log(`RESULT ${JSON.stringify(result)}`);
