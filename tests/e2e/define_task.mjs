// The browser half of test_explorer.py's declared-task test: sign in, define a task on
// the New session page (y = 2 max(x, 0)), see a refused reference marked on its row with
// nothing typed lost, then create it, paste a kernel and start a run on it. Prints
// "RESULT <json>" with what it saw; exits non-zero on the first failure.
import { join } from "node:path";
import { env, launch, signIn, WAIT_MS } from "./browser.mjs";
const KERNEL = `extern "C" __global__ void double_relu(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.0f) * 2.0f;
}
`;

const browser = await launch();
const result = { page_errors: [] };
try {
  const page = await (await browser.newContext({ viewport: { width: 1440, height: 1000 } })).newPage();
  page.on("pageerror", (error) => result.page_errors.push(error.message));

  await signIn(page, "/runs/new/", /\/runs\/new\/$/);

  console.log("define a task");
  await page.click("#define-task summary");
  await page.fill("#id_define_name", "double-relu");
  await page.fill("#id_define_description", "y = 2 max(x, 0)");
  await page.fill(".define-output input[aria-label=reference]", "__import__('os').getcwd()");
  await page.click("#id_define_submit");
  const refused = page.locator(".define-output .field-errors li").first();
  await refused.waitFor({ timeout: WAIT_MS });
  result.refused_reference = await refused.textContent();
  result.kept_after_refusal = (await page.inputValue("#id_define_name")) === "double-relu"
    && (await page.inputValue(".define-output input[aria-label=reference]")) === "__import__('os').getcwd()";
  await page.screenshot({ path: join(env("SHOTS_DIR"), "define-task-errors.png"), fullPage: true });

  await page.fill(".define-output input[aria-label=reference]", "np.maximum(x, 0) * 2");
  await page.fill("#id_define_atol", "0");
  await page.fill("#id_define_rtol", "0");
  await page.click("#id_define_submit");
  await page.waitForFunction(() => document.querySelector("#id_task").value.startsWith("user-double-relu."), null,
    { timeout: WAIT_MS });
  result.selected_task = await page.inputValue("#id_task");
  result.refusal_cleared = (await page.locator(".define-output .field-errors li").count()) === 0;
  result.plan = JSON.parse(await page.inputValue("#id_plan"));

  console.log("start a run on it");
  await page.fill("#id_source", KERNEL);
  await page.fill("#id_budget", "1");
  await Promise.all([page.waitForURL(/\/runs\/\d+\/$/, { timeout: WAIT_MS }),
    page.click("form.new-run button[type=submit]")]);
  result.run_id = Number(/\/runs\/(\d+)\/$/.exec(page.url())[1]);
  await page.locator("#app[data-ready]").waitFor({ timeout: WAIT_MS });
  console.log(`RESULT ${JSON.stringify(result)}`);
} finally {
  await browser.close();
}
