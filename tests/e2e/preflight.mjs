// The browser half of test_preflight.py: on the New session page, a kernel with a typo is
// started; pre-flight shows the compiler's error by its line, marks the line in the
// editor and makes no run; the line's link selects it; fixed, "Check" says it compiles.
// With NO_NVCC set, the server has no nvcc: "Check" says pre-flight could not compile,
// and the run still starts. Prints "RESULT <json>"; exits non-zero on the first failure.
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
  const naive = await page.inputValue("#id_source");
  const status = page.locator("#preflight-status");

  if (process.env.NO_NVCC) {
    await page.click("#id_preflight");
    await page.waitForFunction(() => /could not compile/.test(document.querySelector("#preflight-status").textContent),
      null, { timeout: WAIT_MS });
    result.status = await status.textContent();
    await page.screenshot({ path: join(env("SHOTS_DIR"), "preflight-no-nvcc.png"), fullPage: true });
    await page.fill("#id_budget", "1");
    await Promise.all([page.waitForURL(/\/runs\/\d+\/$/, { timeout: WAIT_MS }),
      page.click("form.new-run button[type=submit]")]);
    result.run_id = Number(/\/runs\/(\d+)\/$/.exec(page.url())[1]);
  } else {
    await page.fill("#id_source", naive.replace("fmaxf", "fmaxx"));
    await page.click("form.new-run button[type=submit]");
    const error = page.locator("#errors-source li").first();
    await error.waitFor({ timeout: WAIT_MS });
    result.source_error = await error.textContent();
    result.marked_lines = await page.locator(".code-editor-marks .marked").evaluateAll(
      (spans) => spans.map((span) => Number(span.dataset.line)));
    result.typo_line = naive.split("\n").findIndex((line) => line.includes("fmaxf")) + 1;
    result.status = await status.textContent();
    result.url_after = new URL(page.url()).pathname;
    await page.screenshot({ path: join(env("SHOTS_DIR"), "preflight-errors.png"), fullPage: true });

    await page.click("#errors-source li button");
    result.selected = await page.evaluate(() => {
      const box = document.querySelector("#id_source");
      return document.activeElement === box ? box.value.slice(box.selectionStart, box.selectionEnd) : null;
    });
    await page.fill("#id_source", naive);
    result.marks_after_edit = await page.locator(".code-editor-marks .marked").count();
    await page.click("#id_preflight");
    await page.waitForFunction(() => /compiles and the plan fits/.test(document.querySelector("#preflight-status").textContent),
      null, { timeout: WAIT_MS });
    result.status_fixed = await status.textContent();
    result.errors_after_fix = await page.locator("#errors-source li").count();
  }
} finally {
  await browser.close();
}
console.log(`RESULT ${JSON.stringify(result)}`);
