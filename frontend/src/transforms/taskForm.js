// The "Define a task" form's data: the POST body for /api/tasks/declared/ from what was
// typed, and where each of the server's messages belongs (a section, or one row).

export const DTYPES = /** @type {const} */ (["float32", "int32"]);

/**
 * @typedef {{name: string, value: string}} SizeRow
 * @typedef {{name: string, dtype: string, shape: string, range?: string}} InputRow
 * @typedef {{name: string, dtype: string, shape: string, reference: string}} OutputRow
 * @typedef {{name: string, description?: string, sizes: SizeRow[], inputs: InputRow[],
 *   outputs: OutputRow[], atol?: string, rtol?: string, l0?: string, flops?: string,
 *   bytes?: string, team?: string}} TaskFormValues
 */

/**
 * The POST body, or the errors found before sending. Error keys are the form's slots:
 * "name", "sizes", "inputs.<row>", "outputs.<row>", "tolerances", "l0_sizes", ...
 * @param {TaskFormValues} values
 * @returns {{payload: Record<string, any>|null, errors: Record<string, string[]>}}
 */
export function taskPayload(values) {
  /** @type {Record<string, string[]>} */
  const errors = {};
  const add = (slot, message) => { (errors[slot] ??= []).push(message); };
  if (!values.name.trim()) add("name", "Give the task a name, e.g. double-relu.");
  /** @type {Record<string, number>} */
  const sizes = {};
  for (const row of values.sizes.filter((r) => r.name.trim() || r.value.trim())) {
    const value = wholeNumber(row.value);
    if (!row.name.trim()) add("sizes", "Every size needs a name.");
    else if (value == null || value < 1) add("sizes", `${row.name.trim()}: a whole number, at least 1.`);
    else sizes[row.name.trim()] = value;
  }
  if (!Object.keys(sizes).length && !errors.sizes) add("sizes", "Give at least one size, e.g. n = 1048576.");
  const inputs = values.inputs.map((row, i) => tensor(row, `inputs.${i}`, add, true));
  const outputs = values.outputs.map((row, i) => tensor(row, `outputs.${i}`, add, false));
  if (!inputs.length) add("inputs", "Give at least one input.");
  if (!outputs.length) add("outputs", "Give at least one output.");
  /** @type {Record<string, string>} */
  const reference = {};
  values.outputs.forEach((row, i) => {
    if (!row.reference.trim()) add(`outputs.${i}`, "Give the reference: a numpy expression, e.g. np.maximum(x, 0).");
    else reference[row.name.trim()] = row.reference.trim();
  });
  const tolerance = {};
  for (const key of /** @type {const} */ (["atol", "rtol"])) {
    const text = (values[key] ?? "").trim();
    if (!text) continue;
    const number = Number(text);
    if (!Number.isFinite(number) || number < 0) add("tolerances", `${key}: a number, 0 or more.`);
    else tolerance[key] = number;
  }
  const l0 = smallSizes(values.l0 ?? "", add);
  if (Object.keys(errors).length) return { payload: null, errors };
  /** @type {Record<string, any>} */
  const payload = { name: values.name.trim(), sizes, inputs, outputs, reference };
  if (values.description?.trim()) payload.description = values.description.trim();
  if (Object.keys(tolerance).length) payload.tolerances = { float32: tolerance }; // the rest: the default
  if (l0.length) payload.l0_sizes = l0;
  if (values.flops?.trim()) payload.flops = values.flops.trim();
  if (values.bytes?.trim()) payload.bytes = values.bytes.trim();
  if (values.team) payload.team = Number(values.team);
  return { payload, errors };
}

function tensor(row, slot, add, isInput) {
  const name = row.name.trim();
  if (!name) add(slot, "Every tensor needs a name.");
  const shape = splitList(row.shape).map(numberOrText);
  if (!shape.length) add(slot, "Give a shape: sizes or expressions, comma-separated, e.g. M, N.");
  /** @type {Record<string, any>} */
  const data = { name, dtype: row.dtype || "float32", shape };
  if (isInput && data.dtype === "int32") {
    const range = splitList(row.range ?? "").map(numberOrText);
    if (range.length !== 2) add(slot, "An int32 input needs a range: lo, hi (values from lo to hi - 1).");
    else data.range = range;
  }
  return data;
}

/** "M=7, N=33" per line (or separated by ;) -> [{M: 7, N: 33}] */
function smallSizes(text, add) {
  const found = [];
  for (const line of text.split(/[\n;]/).map((l) => l.trim()).filter(Boolean)) {
    /** @type {Record<string, number>} */
    const sizes = {};
    for (const part of splitList(line)) {
      const match = /^([A-Za-z_]\w*)\s*=\s*(\d+)$/.exec(part);
      if (!match) {
        add("l0_sizes", `"${part}": write name=number, e.g. n=1031.`);
        continue;
      }
      sizes[match[1]] = Number(match[2]);
    }
    found.push(sizes);
  }
  return found;
}

/** Comma-separated parts, commas inside parentheses kept: "M, cdiv(N, 2)" -> two parts. */
function splitList(text) {
  const parts = [];
  let depth = 0, current = "";
  for (const char of String(text ?? "")) {
    if (char === "," && depth === 0) {
      parts.push(current);
      current = "";
      continue;
    }
    if (char === "(") depth += 1;
    if (char === ")") depth = Math.max(0, depth - 1);
    current += char;
  }
  parts.push(current);
  return parts.map((p) => p.trim()).filter(Boolean);
}

function numberOrText(text) {
  return /^\d+$/.test(text) ? Number(text) : text;
}

function wholeNumber(text) {
  const trimmed = String(text ?? "").trim();
  return /^\d+$/.test(trimmed) ? Number(trimmed) : null;
}

/**
 * The server's 400 -> messages per form slot, and the ones that fit no slot. The harness
 * names the field at the start of its message ("inputs[1].shape: ..."); DRF nests its own
 * ({"inputs": [{}, {"shape": ["..."]}]}).
 * @param {any} body
 * @param {string[]} outputNames the output rows' names, in order (for "reference.<name>")
 * @returns {{slots: Record<string, string[]>, general: string[]}}
 */
export function taskErrors(body, outputNames) {
  /** @type {Record<string, string[]>} */
  const slots = {};
  /** @type {string[]} */
  const general = [];
  const add = (slot, message) => { (slots[slot] ??= []).push(message); };
  if (body == null || typeof body !== "object") {
    general.push(typeof body === "string" && body ? body : "The server refused the task.");
    return { slots, general };
  }
  for (const [key, value] of Object.entries(body)) {
    if (key === "non_field_errors" || key === "detail") {
      general.push(...flatten(value));
    } else if ((key === "inputs" || key === "outputs") && Array.isArray(value) && value.some(isObject)) {
      value.forEach((item, i) => flatten(item).forEach((m) => add(`${key}.${i}`, m)));
    } else {
      for (const message of flatten(value)) add(slotOf(key, message, outputNames), message);
    }
  }
  return { slots, general };
}

function slotOf(key, message, outputNames) {
  const row = /^(inputs|outputs)\[(\d+)\]/.exec(message);
  if (row) return `${row[1]}.${row[2]}`;
  const reference = /^reference\.(\w+)/.exec(message);
  if (reference && outputNames.includes(reference[1])) return `outputs.${outputNames.indexOf(reference[1])}`;
  return key === "reference" ? "outputs" : key;
}

function isObject(value) {
  return value != null && typeof value === "object" && !Array.isArray(value);
}

function flatten(value, prefix = "") {
  if (value == null) return [];
  if (Array.isArray(value)) return value.flatMap((v) => flatten(v, prefix));
  if (typeof value === "object") return Object.entries(value).flatMap(([k, v]) => flatten(v, `${prefix}${k}: `));
  return [`${prefix}${value}`];
}
