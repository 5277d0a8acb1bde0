// The browser half of test_explorer.py's intent test: on the New session page, ask the
// LLM (a scripted OpenAI-compatible server) to write the kernel from the intent; the
// first answer is a refusal, shown next to the intent with nothing typed lost; the
// second fills the editor and the plan and names its writer. Prints "RESULT <json>".
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(new URL("../../frontend/package.json", import.meta.url));
const { chromium } = require("playwright-core");

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};
const BASE = env("BASE_URL");
const WAIT_MS = 60_000;
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];
const INTENT = "relu over 2^28 floats, one coalesced pass";

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: ARGS });
const result = { page_errors: [] };
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  page.on("pageerror", (error) => result.page_errors.push(error.message));

  await page.goto(`${BASE}/accounts/login/?next=/runs/new/`);
  await page.fill("input[name=username]", env("E2E_USER"));
  await page.fill("input[name=password]", env("E2E_PASSWORD"));
  await Promise.all([page.waitForURL(/\/runs\/new\/$/), page.click("main form button[type=submit]")]);
  await page.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
  result.naive_source = await page.inputValue("#id_source");

  console.log("a refusal");
  await page.fill("#id_intent", INTENT);
  await page.click("#id_draft");
  const refused = page.locator("#errors-intent li").first();
  await refused.waitFor({ timeout: WAIT_MS });
  result.refusal = await refused.textContent();
  result.kept = (await page.inputValue("#id_intent")) === INTENT
    && (await page.inputValue("#id_source")) === result.naive_source;

  console.log("a kernel");
  await page.click("#id_draft");
  await page.waitForFunction(() => document.querySelector("#drafted")?.textContent?.startsWith("Written by"),
    null, { timeout: WAIT_MS });
  result.drafted = await page.textContent("#drafted");
  result.source = await page.inputValue("#id_source");
  result.plan = JSON.parse(await page.inputValue("#id_plan"));
  result.errors_cleared = (await page.locator("#errors-intent li").count()) === 0;
  await page.screenshot({ path: join(env("SHOTS_DIR"), "draft-kernel.png"), fullPage: true });
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}
