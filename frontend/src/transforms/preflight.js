// Pre-flight (POST /api/runs/preflight/): what the gate would reject the kernel and plan
// for before a GPU, asked by the New session form before it creates a run. Here: the
// request body, and the answer as the form shows it (messages by field, the kernel's
// lines to mark, whether the run may start, a note when the server could not compile).

/**
 * @typedef {{field: string, line: number|null, message: string}} Finding
 * @typedef {{ok: boolean, findings: Finding[], not_compiled: string}} PreflightAnswer
 * @typedef {{ok: boolean, fields: Record<string, string[]>, lines: number[], status: string}} PreflightView
 */

/**
 * The pre-flight body from a run's POST body (runPayload): the task, kernel and plan only.
 * @param {Record<string, any>} runBody
 */
export function preflightBody(runBody) {
  return { task: runBody.task, source: runBody.source, plan: runBody.plan };
}

/**
 * @param {PreflightAnswer} answer
 * @returns {PreflightView}
 */
export function preflightView(answer) {
  /** @type {Record<string, string[]>} */
  const fields = {};
  /** @type {Set<number>} */
  const lines = new Set();
  for (const finding of answer.findings ?? []) {
    const message = withoutLine(finding.message);
    (fields[finding.field] ??= []).push(finding.line != null ? `line ${finding.line}: ${message}` : message);
    if (finding.line != null) lines.add(finding.line);
  }
  const count = answer.findings?.length ?? 0;
  let status;
  if (count) {
    status = `Pre-flight found ${count === 1 ? "a problem" : `${count} problems`} the gate would reject `
      + "(marked below); no run was created.";
  } else if (answer.not_compiled) {
    status = `Pre-flight could not compile the kernel: ${answer.not_compiled}. The launch plan was checked; `
      + "the run may start, and the gate compiles the kernel then.";
  } else {
    status = "Pre-flight: the kernel compiles and the plan fits, as the gate checks them before a GPU.";
  }
  return { ok: count === 0, fields, lines: [...lines].sort((a, b) => a - b), status };
}

/** "line 3: x" -> "x": the line is shown as the finding's own, once. */
function withoutLine(/** @type {string} */ message) {
  return message.replace(/^line \d+: /, "");
}

/**
 * Where line `line` (from 1) of `text` starts and ends, for selecting it in the editor.
 * @param {string} text @param {number} line
 * @returns {[number, number]}
 */
export function lineRange(text, line) {
  let start = 0;
  for (let n = 1; n < line; n += 1) {
    const next = text.indexOf("\n", start);
    if (next === -1) return [text.length, text.length];
    start = next + 1;
  }
  const end = text.indexOf("\n", start);
  return [start, end === -1 ? text.length : end];
}
