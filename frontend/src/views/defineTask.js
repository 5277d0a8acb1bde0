// "Define a task" on the new-session page: sizes, tensors and their shapes, a numpy
// reference per output, tolerances, optional small sizes. It posts the definition to
// /api/tasks/declared/ and hands the created task to `onCreated`. Messages show next to
// the row or section they are about; nothing typed is lost.
import { api, ApiError } from "../api.js";
import { DTYPES, taskErrors, taskPayload } from "../transforms/taskForm.js";
import { fill, h } from "./dom.js";

const SECTIONS = ["name", "description", "sizes", "inputs", "outputs", "tolerances", "l0_sizes", "flops", "bytes", "team"];

/**
 * @param {{team: () => string, onCreated: (task: any) => void}} options
 * @returns {HTMLElement}
 */
export function defineTaskSection({ team, onCreated }) {
  const errors = Object.fromEntries(SECTIONS.map((s) => [s, h("ul", { class: "field-errors", "data-errors-for": `define-${s}` })]));
  const general = h("div", { class: "form-errors", role: "alert" });
  const done = h("p", { class: "hint", role: "status" });
  const name = text("define_name", { placeholder: "double-relu", size: 24 });
  const description = text("define_description", { placeholder: "y = 2 max(x, 0), fp32", size: 48 });
  const sizes = rowSet("size", sizeRow, [{ name: "n", value: "1048576" }]);
  const inputs = rowSet("input", inputRow, [{ name: "x", dtype: "float32", shape: "n" }]);
  const outputs = rowSet("output", outputRow, [{ name: "y", dtype: "float32", shape: "n" }]);
  const atol = text("define_atol", { placeholder: "1e-4", size: 8 });
  const rtol = text("define_rtol", { placeholder: "1e-4", size: 8 });
  const l0 = /** @type {HTMLTextAreaElement} */ (h("textarea", { id: "id_define_l0", rows: 2, class: "mono",
    placeholder: "optional, one per line: n=1031 (left empty: small odd sizes are generated)" }));
  const flops = text("define_flops", { placeholder: "e.g. 2 * n (default 0)", size: 20 });
  const bytes = text("define_bytes", { placeholder: "default: inputs read + outputs written", size: 32 });
  const submit = /** @type {HTMLButtonElement} */ (h("button", { type: "button", id: "id_define_submit", onclick: create },
    "Create the task"));

  const field = (key, label, control, hint = /** @type {string|null} */ (null)) => h("div", { class: `field field-define-${key}` },
    h("label", null, label), control, hint ? h("p", { class: "hint" }, hint) : null, errors[key]);
  const section = h("details", { class: "define-task", id: "define-task" },
    h("summary", null, "Define a task (reference, shapes, tolerance)"),
    h("p", { class: "hint" }, "A task is data, not code: sizes, tensors with shapes over them, and one numpy "
      + "expression per output (np.maximum, np.exp, np.sum(..., axis=1, keepdims=True), np.matmul, slices…), "
      + "computed in float64. It is checked on small sizes before it is saved."),
    general,
    h("div", { class: "field-row" }, field("name", "Name (a slug)", name), field("description", "Description (optional)", description)),
    field("sizes", "Sizes (the full, timed size)", sizes.root),
    field("inputs", "Inputs", inputs.root, "Shape: sizes or expressions, comma-separated (M, N). An int32 input needs a range: lo, hi."),
    field("outputs", "Outputs and their reference", outputs.root, "The reference may use the inputs, the sizes and np.<function>."),
    h("div", { class: "field-row" },
      field("tolerances", "float32 tolerance: atol, rtol", h("div", null, atol, " ", rtol), "|out − ref| ≤ atol + rtol·|ref|"),
      field("flops", "FLOPs (optional)", flops), field("bytes", "Bytes (optional)", bytes)),
    field("l0_sizes", "Small sizes (optional)", l0),
    h("div", { class: "actions" }, submit, " ", done));
  // Enter in a text box would submit the whole new-session form.
  section.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && event.target instanceof HTMLInputElement) event.preventDefault();
  });
  return section;

  function read() {
    return { name: name.value, description: description.value, sizes: sizes.read(), inputs: inputs.read(),
      outputs: outputs.read(), atol: atol.value, rtol: rtol.value, l0: l0.value, flops: flops.value,
      bytes: bytes.value, team: team() };
  }

  async function create() {
    show({}, []);
    fill(done);
    const { payload, errors: local } = taskPayload(read());
    if (!payload) return show(local, ["Please fix the task's fields marked below."]);
    submit.disabled = true;
    submit.textContent = "Checking…";
    try {
      const created = await api("/api/tasks/declared/", { method: "POST", body: payload });
      fill(done, `${created.name} is saved and picked as this session's task: paste your kernel below.`);
      onCreated(created);
    } catch (error) {
      if (error instanceof ApiError && error.status === 400) {
        const { slots, general: top } = taskErrors(error.body, outputs.read().map((o) => o.name.trim()));
        show(slots, top.length ? top : ["The server did not accept the task: see the fields marked below."]);
      } else {
        show({}, [`Could not create the task: ${error.message}`]);
      }
    } finally {
      submit.disabled = false;
      submit.textContent = "Create the task";
    }
  }

  function show(slots, top) {
    for (const list of [...Object.values(errors), ...sizes.errorLists(), ...inputs.errorLists(), ...outputs.errorLists()]) fill(list);
    const unplaced = [];
    for (const [slot, messages] of Object.entries(slots)) {
      const [kind, index] = slot.split(".");
      const list = index == null ? errors[kind] : { inputs, outputs }[kind]?.errorList(Number(index));
      if (list) fill(list, messages.map((m) => h("li", null, m)));
      else unplaced.push(...messages);
    }
    fill(general, [...top, ...unplaced].map((m) => h("p", null, m)));
    const first = section.querySelector(".field-errors:not(:empty)");
    (first ?? (top.length ? general : null))?.scrollIntoView({ block: "nearest" });
  }
}

function text(id, attrs) {
  return /** @type {HTMLInputElement} */ (h("input", { type: "text", id: id ? `id_${id}` : null, spellcheck: "false", ...attrs }));
}

function dtypeSelect(value) {
  return /** @type {HTMLSelectElement} */ (h("select", { "aria-label": "dtype" },
    DTYPES.map((d) => h("option", { value: d, selected: d === value }, d))));
}

function sizeRow(values) {
  const name = text("", { "aria-label": "size name", placeholder: "n", size: 8, value: values.name ?? "" });
  const value = text("", { "aria-label": "size value", placeholder: "1048576", size: 12, value: values.value ?? "" });
  return { controls: [name, " = ", value], read: () => ({ name: name.value, value: value.value }) };
}

function inputRow(values) {
  const name = text("", { "aria-label": "input name", placeholder: "x", size: 8, value: values.name ?? "" });
  const dtype = dtypeSelect(values.dtype ?? "float32");
  const shape = text("", { "aria-label": "input shape", placeholder: "M, N", size: 16, value: values.shape ?? "" });
  const range = text("", { "aria-label": "int32 range", placeholder: "int32: lo, hi", size: 12 });
  return { controls: [name, dtype, shape, range],
    read: () => ({ name: name.value, dtype: dtype.value, shape: shape.value, range: range.value }) };
}

function outputRow(values) {
  const name = text("", { "aria-label": "output name", placeholder: "y", size: 8, value: values.name ?? "" });
  const dtype = dtypeSelect(values.dtype ?? "float32");
  const shape = text("", { "aria-label": "output shape", placeholder: "M, N", size: 16, value: values.shape ?? "" });
  const reference = text("", { "aria-label": "reference", class: "mono", placeholder: "np.maximum(x, 0) * 2", size: 48 });
  return { controls: [name, dtype, shape, " = ", reference],
    read: () => ({ name: name.value, dtype: dtype.value, shape: shape.value, reference: reference.value }) };
}

/**
 * Rows of controls with "+ <kind>" and "remove" buttons; each row has its own error list.
 * @param {string} kind
 * @param {(values: Record<string, string>) => {controls: any[], read: () => any}} make
 * @param {Record<string, string>[]} initial
 */
function rowSet(kind, make, initial) {
  /** @type {{read: () => any, errors: HTMLElement}[]} */
  const rows = [];
  const list = h("div", { class: `define-rows define-${kind}s` });
  const add = (values) => {
    const made = make(values);
    const row = { read: made.read, errors: h("ul", { class: "field-errors" }) };
    const element = h("div", { class: `define-row define-${kind}` }, h("div", { class: "field-row" }, made.controls,
      h("button", { type: "button", class: "link", onclick: () => { rows.splice(rows.indexOf(row), 1); element.remove(); } },
        "remove")), row.errors);
    rows.push(row);
    list.append(element);
  };
  initial.forEach(add);
  return {
    root: h("div", null, list, h("button", { type: "button", class: `add-${kind}`, onclick: () => add({}) }, `+ ${kind}`)),
    read: () => rows.map((r) => r.read()),
    errorLists: () => rows.map((r) => r.errors),
    /** @param {number} index */
    errorList: (index) => rows[index]?.errors,
  };
}
