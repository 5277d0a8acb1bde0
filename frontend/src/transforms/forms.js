// The new-session form's data: what is sent, and what the server's 400 says per field.

export const JUDGES = /** @type {const} */ (["rules", "llm"]);
// The API's largest `parallel` (optiml_web/limits.py MAX_PARALLEL).
export const MAX_PARALLEL = 64;

/**
 * @typedef {{task: string, source: string, plan: string, budget: string, judge: string,
 *   seed: string, team?: string, intent?: string, sources?: string[]|null, screen?: boolean,
 *   parallel?: string, writingJob?: number|null, evaluator?: string}} RunFormValues
 */

/**
 * The POST body for /api/runs/, or the errors found before sending (the plan must be
 * JSON; numbers must be whole). Field names match the API's, so server errors and
 * these land in the same places.
 * @param {RunFormValues} values
 * @returns {{payload: Record<string, any>|null, errors: Record<string, string[]>}}
 */
export function runPayload(values) {
  /** @type {Record<string, string[]>} */
  const errors = {};
  const add = (field, message) => { (errors[field] ??= []).push(message); };
  if (!values.task) add("task", "Pick a task.");
  if (!values.source.trim()) add("source", "Paste or upload a kernel.");
  let plan = null;
  try {
    plan = JSON.parse(values.plan);
    if (plan == null || typeof plan !== "object" || Array.isArray(plan)) add("plan", "The plan must be a JSON object.");
  } catch (error) {
    add("plan", `Not valid JSON: ${/** @type {Error} */ (error).message}`);
  }
  const budget = wholeNumber(values.budget);
  if (budget == null || budget < 1) add("budget", "The budget is a whole number of evaluations, at least 1.");
  const seed = wholeNumber(values.seed);
  if (seed == null) add("seed", "The seed is a whole number.");
  if (!JUDGES.includes(/** @type {any} */ (values.judge))) add("judge", `The judge is one of ${JUDGES.join(", ")}.`);
  const parallel = values.parallel == null || values.parallel === "" ? 1 : wholeNumber(values.parallel);
  if (parallel == null || parallel < 1 || parallel > MAX_PARALLEL) {
    add("parallel", `Evaluations at once is a whole number from 1 to ${MAX_PARALLEL}.`);
  }
  if (Object.keys(errors).length) return { payload: null, errors };
  /** @type {Record<string, any>} */
  const payload = { task: values.task, source: values.source, plan, budget, judge: values.judge, seed };
  if (values.team) payload.team = Number(values.team);
  if (values.intent?.trim()) payload.intent = values.intent.trim();
  if (values.sources != null) payload.sources = values.sources; // null: every configured source
  if (values.screen === false) payload.screen = false; // the server screens by default
  if (parallel !== 1) payload.parallel = parallel;
  // A demo run replays the task's recorded search (its judge, seed, sources, budget at most).
  if (values.evaluator === "demo") payload.evaluator = "demo";
  // The writing job the kernel came from: its attempts become the tree's first nodes,
  // whether or not the kernel was edited after it was written.
  if (values.writingJob != null) payload.writing_job = values.writingJob;
  return { payload, errors };
}

function wholeNumber(text) {
  const trimmed = String(text ?? "").trim();
  if (!/^-?\d+$/.test(trimmed)) return null;
  return Number(trimmed);
}

/**
 * DRF's 400 body -> messages per field and general ones. Handles {"field": ["msg"]},
 * {"field": "msg"}, nested objects ({"plan": {"launches": [...]}}), "non_field_errors"
 * and "detail".
 * @param {any} body
 * @param {readonly string[]} knownFields
 * @returns {{fields: Record<string, string[]>, general: string[]}}
 */
export function fieldErrors(body, knownFields) {
  /** @type {Record<string, string[]>} */
  const fields = {};
  /** @type {string[]} */
  const general = [];
  if (body == null || typeof body !== "object") {
    general.push(typeof body === "string" && body ? body : "The server refused the request.");
    return { fields, general };
  }
  for (const [key, value] of Object.entries(body)) {
    const messages = flatten(value);
    if (knownFields.includes(key)) fields[key] = messages;
    else if (key === "non_field_errors" || key === "detail") general.push(...messages);
    else general.push(...messages.map((m) => `${key}: ${m}`));
  }
  return { fields, general };
}

function flatten(value, prefix = "") {
  if (value == null) return [];
  if (Array.isArray(value)) return value.flatMap((v) => flatten(v, prefix));
  if (typeof value === "object") return Object.entries(value).flatMap(([k, v]) => flatten(v, `${prefix}${k}: `));
  return [`${prefix}${value}`];
}

/**
 * What the kernel box should hold after the task changes: the new task's naive kernel,
 * unless the person typed their own (the box is neither empty nor the last prefill).
 * @param {string} current
 * @param {string|null} lastPrefill
 * @param {string} naive
 */
export function prefillFor(current, lastPrefill, naive) {
  if (!current.trim() || current === lastPrefill) return naive;
  return current;
}

/**
 * What the writers did, in words: whose kernel it is, who helped, and each round that
 * did not make it (where it stopped), so the person knows what they are reviewing.
 * @param {Record<string, any>} written
 */
export function writtenSummary(written) {
  const helpers = (written.experts ?? []).filter((/** @type {string} */ e) => e !== written.writer);
  const rounds = (written.attempts ?? []).slice(0, -1).map((/** @type {Record<string, any>} */ a) =>
    `round ${a.round} by ${a.writer} stopped at ${a.stage}`);
  return [`Written by ${written.writer}${helpers.length ? ` with ${helpers.join(", ")}` : ""}: ${written.title}.`,
    written.rationale, rounds.length ? `Before it: ${rounds.join("; ")}.` : "",
    checked(written.attempts?.[written.attempts.length - 1]), "Review it before you start."].filter(Boolean).join(" ");
}

/** What the gate could say of the kernel written, in words. */
function checked(/** @type {Record<string, any>|undefined} */ last) {
  if (last?.stage === "passed") return "It passed L0; the run's first gate checks it in full.";
  if (last?.stage === "compiled") return "Compiled; the run's first gate checks it.";
  return last?.message ? `Not checked here: ${last.message}` : "";
}

