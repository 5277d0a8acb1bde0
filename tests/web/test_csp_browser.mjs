// The browser half of test_csp_browser.py: every page of the app in a real Chromium under
// the server's Content-Security-Policy, collecting each violation the browser reports
// (a refused inline script or style, a refused source). Prints "RESULT <json>".
import { env, launch, signIn, WAIT_MS } from "../e2e/browser.mjs";

const BASE = env("BASE_URL");
const RUN_ID = env("RUN_ID");
const TOKEN = env("SHARE_TOKEN");
const browser = await launch();
const result = { violations: [], page_errors: [], visited: [] };
try {
  const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
  // Injected through the DevTools protocol, which the policy does not govern.
  await context.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (event) => {
      (window.__csp ??= []).push(`${event.violatedDirective} ${event.blockedURI} ${event.sourceFile}:${event.lineNumber}`);
    });
  });
  const page = await context.newPage();
  page.on("pageerror", (error) => result.page_errors.push(error.message));
  page.on("console", (message) => {
    if (/Content Security Policy/i.test(message.text())) result.violations.push(message.text());
  });
  const collect = async (label) => {
    result.visited.push(label);
    for (const seen of await page.evaluate(() => window.__csp ?? [])) result.violations.push(`${label}: ${seen}`);
  };

  await signIn(page, "/runs/", /\/runs\/$/);
  await collect("login + runs");
  await page.goto(`${BASE}/runs/${RUN_ID}/`);
  await page.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
  await page.click('svg.tree g.node[data-id="1"] circle');
  await page.waitForSelector('.inspector[data-node-id="1"]', { timeout: WAIT_MS });
  // The metric-delta bars get their width through the CSSOM: it must have applied.
  result.delta_bar_widths = await page.$$eval(".inspector .delta-bar", (bars) => bars.map((bar) => bar.getBoundingClientRect().width));
  result.highlighted_tokens = await page.locator(".inspector .code .tok-keyword, .inspector .code [class^=tok-]").count();
  await collect("run + inspector");
  await page.goto(`${BASE}/runs/new/`);
  await page.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
  await collect("new session");
  await page.goto(`${BASE}/share/${TOKEN}/`);
  await page.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
  await collect("share page");
  await page.goto(`${BASE}/welcome/`);
  await collect("first-run page");
  await page.goto(`${BASE}/api/docs/`);
  await page.locator(".swagger-ui .opblock").first().waitFor({ timeout: WAIT_MS });
  result.swagger_operations = await page.locator(".swagger-ui .opblock").count();
  await collect("api docs");
  await page.goto(`${BASE}/admin/login/`);
  await collect("admin login");
} finally {
  await browser.close();
}
console.log(`RESULT ${JSON.stringify(result)}`);
