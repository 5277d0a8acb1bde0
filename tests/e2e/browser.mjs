// What the browser halves of the e2e tests share: their settings from the environment,
// Chromium launched with the flags a machine with no network and no GPU needs
// (python-svc.md), and signing in on the login page.
import { createRequire } from "node:module";

const require = createRequire(new URL("../../frontend/package.json", import.meta.url));
const { chromium } = require("playwright-core");

/** An environment variable the test must set. */
export function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
}

export const BASE = env("BASE_URL");
export const WAIT_MS = 60_000; // the longest any one step may take
const ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync"];

export function launch() {
  return chromium.launch({ executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium", args: ARGS });
}

/** Sign in (as E2E_USER unless told) through the login page, landing on `next` with the app ready. */
export async function signIn(page, next, landing, user = env("E2E_USER"), password = env("E2E_PASSWORD")) {
  await page.goto(`${BASE}/accounts/login/?next=${next}`);
  await page.fill("input[name=username]", user);
  await page.fill("input[name=password]", password);
  await Promise.all([page.waitForURL(landing), page.click("main form button[type=submit]")]);
  await page.locator("#app[data-ready=true]").waitFor({ timeout: WAIT_MS });
}
