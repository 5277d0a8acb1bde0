// A writing job (POST /api/kernels/write/, then GET its url until it ends) read for the
// New session page: a line on where it stands, a row per attempt as the attempts arrive,
// and how long to wait before looking again. Pure: no DOM, no fetch.
import { backoffDelay } from "./backoff.js";

export const WRITING_STATUSES = Object.freeze(["queued", "running", "done", "failed"]);

/** Whether the job has ended (done or failed): nothing more will arrive. */
export function writingEnded(/** @type {{status: string}} */ job) {
  if (!WRITING_STATUSES.includes(job.status)) throw new RangeError(`unknown writing job status ${JSON.stringify(job.status)}`);
  return job.status === "done" || job.status === "failed";
}

/**
 * One attempt as a row: who wrote it, who helped, where it stopped and what was said.
 * @param {{round: number, writer: string, experts?: string[], stage: string, passed?: boolean, message?: string}} a
 */
export function attemptRow(a) {
  const helpers = (a.experts ?? []).filter((e) => e !== a.writer);
  const what = a.round === 0 ? "first kernel" : `repair ${a.round}`;
  const message = (a.message ?? "").split("\n")[0].slice(0, 160);
  const who = `${what} by ${a.writer}${helpers.length ? ` with ${helpers.join(", ")}` : ""}`;
  return { key: `${a.round}:${a.writer}`, stage: a.stage, passed: Boolean(a.passed),
    text: `${who}: stopped at ${a.stage}${message ? ` (${message})` : ""}` };
}

/**
 * Where the job stands, in words, for the page's status line.
 * @param {{status: string, attempts?: any[], message?: string}} job
 */
export function writingStatusLine(job) {
  const n = job.attempts?.length ?? 0;
  const so = n ? ` · ${n} attempt${n === 1 ? "" : "s"} so far` : "";
  switch (job.status) {
    case "queued": return "Queued: waiting for a worker to write it…";
    case "running": return `Writing${so}…`;
    case "done": return "Written.";
    case "failed": return `Nobody could write it: ${job.message ?? ""}`.trim();
    default: throw new RangeError(`unknown writing job status ${JSON.stringify(job.status)}`);
  }
}

/** How long to wait before reading the job again: quick at first, then every few seconds. */
export function writingPollDelay(/** @type {number} */ reads, random = Math.random) {
  return backoffDelay(reads, { initialMs: 500, maxMs: 4000, factor: 1.5, jitter: 0.1 }, random);
}
