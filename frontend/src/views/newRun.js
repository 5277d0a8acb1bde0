// The new-session form: a task (its naive kernel and plan as the starting point) or one
// defined here (defineTask.js), the kernel (typed, pasted or uploaded), the launch plan
// as JSON, budget, judge and seed. Errors, ours or the server's, show next to their
// fields; nothing typed is lost. Before a run is created, pre-flight asks the server what
// the gate would reject on the CPU (transforms/preflight.js): compile errors are marked on
// their lines in the editor, and a kernel the gate would refuse costs no run.
import { api, ApiError } from "../api.js";
import { fieldErrors, JUDGES, MAX_PARALLEL, prefillFor, runPayload, writtenSummary } from "../transforms/forms.js";
import { preflightBody, preflightView } from "../transforms/preflight.js";
import { format } from "../transforms/runs.js";
import { attemptRow, writingEnded, writingPollDelay, writingStatusLine } from "../transforms/writing.js";
import { codeEditor } from "./code.js";
import { defineTaskSection } from "./defineTask.js";
import { fill, h } from "./dom.js";

const FIELDS = /** @type {const} */ (["task", "evaluator", "intent", "source", "plan", "budget", "parallel", "judge", "seed", "sources", "team"]);

/** @param {HTMLElement} root */
export async function mountNewRun(root) {
  const [tasks, me, sourceList, demo] = await Promise.all([api("/api/tasks/"), api("/api/me/").catch(() => ({ teams: [] })),
    api("/api/sources/").catch(() => []), api("/api/demo/").catch(() => ({ default: "gate", tasks: {}, note: "", gate_note: "" }))]);
  const byName = new Map(tasks.map((t) => [t.name, t]));
  const wanted = new URLSearchParams(window.location.search).get("task");
  const errors = Object.fromEntries(FIELDS.map((f) => [f, h("ul", { class: "field-errors", id: `errors-${f}`, "data-errors-for": f })]));
  const general = h("div", { class: "form-errors", role: "alert" });

  const task = /** @type {HTMLSelectElement} */ (h("select", { name: "task", id: "id_task", required: true },
    tasks.map((t) => h("option", { value: t.name, selected: t.name === wanted }, t.name))));
  const taskInfo = h("div", { class: "task-info" });
  // Demo or the server's evaluator, per run: demo is the default while no GPU worker has
  // measured a kernel here (GET /api/demo/ says so), for a task that has a recording.
  const evaluator = /** @type {HTMLSelectElement} */ (h("select", { name: "evaluator", id: "id_evaluator" },
    h("option", { value: "gate" }, "GPU worker (the gate measures every kernel)"),
    h("option", { value: "demo" }, "Demo (times recorded on a GPU, replayed)")));
  const evaluatorHint = h("p", { class: "hint", id: "evaluator-hint" });
  let evaluatorTouched = false;
  evaluator.addEventListener("change", () => { evaluatorTouched = true; evaluatorChanged(); });
  function evaluatorChanged() {
    const recorded = demo.tasks?.[task.value];
    if (!evaluatorTouched) evaluator.value = demo.default === "demo" && recorded ? "demo" : "gate";
    const demoRun = evaluator.value === "demo";
    for (const control of [budget, judge, seed, parallel]) control.disabled = demoRun;
    fill(evaluatorHint, demoRun
      ? (recorded ? `${demo.note ? `${demo.note} ` : ""}Replays the search recorded on the ${recorded.gpu} on ${recorded.recorded_at} from the task's naive kernel `
        + `(${recorded.budget} evaluations, its own judge, seed and sources); nothing runs on a GPU, and the run's page says so.`
        : `The task ${task.value} has no demo recording; tasks with one: ${Object.keys(demo.tasks ?? {}).join(", ") || "none"}.`)
      : demo.gate_note || demo.note || "Every kernel goes through the gate on a GPU worker.");
    evaluatorHint.classList.toggle("warning", !demoRun && Boolean(demo.gate_note));
  }
  const editor = codeEditor({ name: "source", id: "id_source" });
  const upload = /** @type {HTMLInputElement} */ (h("input", { type: "file", id: "id_upload", accept: ".cu,.cuh,.h,.cpp,.txt,text/plain" }));
  const plan = /** @type {HTMLTextAreaElement} */ (h("textarea", { name: "plan", id: "id_plan", rows: 12, spellcheck: "false", class: "mono" }));
  const budget = /** @type {HTMLInputElement} */ (h("input", { type: "number", name: "budget", id: "id_budget", min: 1, value: 30, required: true }));
  const parallel = /** @type {HTMLInputElement} */ (h("input", { type: "number", name: "parallel", id: "id_parallel", min: 1, max: MAX_PARALLEL, value: 1, required: true }));
  const judge = /** @type {HTMLSelectElement} */ (h("select", { name: "judge", id: "id_judge" },
    JUDGES.map((j) => h("option", { value: j }, j === "rules" ? "rules (profile-driven, no LLM)" : "LLM (OpenAI-compatible endpoint)"))));
  const seed = /** @type {HTMLInputElement} */ (h("input", { type: "number", name: "seed", id: "id_seed", value: 0, required: true }));
  const team = /** @type {HTMLSelectElement} */ (h("select", { name: "team", id: "id_team" }, h("option", { value: "" }, "just me"),
    (me.teams ?? []).map((t) => h("option", { value: t.id }, t.name))));
  const intent = /** @type {HTMLTextAreaElement} */ (h("textarea", { name: "intent", id: "id_intent", rows: 2,
    placeholder: "e.g. row softmax over 4096×8192 fp32, numerically stable" }));
  const sourceBoxes = sourceList.map((s) => /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", name: "sources", value: s.name, checked: true })));
  const sourcesField = sourceBoxes.length ? h("fieldset", { class: "field field-sources", id: "id_sources" },
    h("legend", null, "Proposal sources (besides the judge)"),
    sourceBoxes.map((box, i) => h("label", { class: "checkbox" }, box, " ", h("code", null, box.value),
      sourceList[i].note ? h("span", { class: "muted source-note" }, ` (${sourceList[i].note})`) : null)), errors.sources) : null;
  const screen = /** @type {HTMLInputElement} */ (h("input", { type: "checkbox", name: "screen", id: "id_screen", checked: true }));
  const submit = /** @type {HTMLButtonElement} */ (h("button", { type: "submit", class: "primary" }, "Start the search"));
  const check = /** @type {HTMLButtonElement} */ (h("button", { type: "button", id: "id_preflight", onclick: checkOnly },
    "Check the kernel and plan"));
  const preflightStatus = h("p", { class: "hint", id: "preflight-status", role: "status" });
  const draft = /** @type {HTMLButtonElement} */ (h("button", { type: "button", id: "id_draft", onclick: writeFromIntent },
    "Write the kernel from the intent (LLM)"));
  const drafted = h("p", { class: "hint", id: "drafted", role: "status" });
  // The attempts of the writing job as they arrive (who wrote, who helped, where it stopped).
  const attemptList = h("ol", { class: "hint", id: "writing-attempts" });

  let lastSource = /** @type {string|null} */ (null), lastPlan = /** @type {string|null} */ (null);
  function taskChanged() {
    const t = byName.get(task.value);
    if (!t) return;
    const naivePlan = JSON.stringify(t.naive_plan ?? {}, null, 2);
    editor.setValue(prefillFor(editor.textarea.value, lastSource, t.naive_source ?? ""));
    plan.value = prefillFor(plan.value, lastPlan, naivePlan);
    lastSource = t.naive_source ?? "";
    lastPlan = naivePlan;
    evaluatorChanged();
    const args = t.naive_plan?.launches?.[0]?.args ?? [];
    fill(taskInfo, h("p", null, t.description ?? ""), h("p", { class: "muted" },
      `sizes: ${Object.entries(t.sizes ?? {}).map(([k, v]) => `${k}=${v}`).join(", ") || "—"} · vendor library: ${format.ms(t.vendor_ms)}`),
    t.declared ? h("p", { class: "hint" }, `A task defined here has no naive kernel: paste yours. The plan below is a `
      + `starting point that passes ${args.join(", ")} in this order.`) : null);
  }
  const defineTask = defineTaskSection({ team: () => team.value, onCreated: (created) => {
    const t = { name: created.name, description: created.description, sizes: created.definition.sizes,
      vendor_ms: null, naive_source: "", naive_plan: created.starting_plan, declared: true };
    byName.set(t.name, t);
    task.append(h("option", { value: t.name }, t.name));
    task.value = t.name;
    taskChanged();
  } });
  task.addEventListener("change", taskChanged);
  upload.addEventListener("change", async () => {
    const file = upload.files?.[0];
    if (file) editor.setValue(await file.text());
  });

  const field = (name, label, control, hint = /** @type {string|null} */ (null)) => h("div", { class: `field field-${name}` },
    h("label", { for: `id_${name}` }, label), control, hint ? h("p", { class: "hint" }, hint) : null, errors[name]);
  const form = h("form", { class: "new-run", novalidate: true, onsubmit: send },
    general,
    field("task", "Task", task), taskInfo, field("evaluator", "Measured by", evaluator), evaluatorHint, defineTask,
    field("intent", "Intent (optional)", h("div", null, intent, h("p", { class: "upload" }, draft), drafted, attemptList),
      "What the kernel should do, in words: kept with the run, and read by an LLM judge. The button asks the "
      + "configured experts (or the LLM judge's model) to write a first kernel and plan into the editor below; "
      + "each one is compiled, and compile errors go back to the writer. Without an endpoint or a local model "
      + "nobody can write: start from the task's naive kernel."),
    field("source", "Kernel (CUDA)", h("div", null, editor.root,
      h("p", { class: "upload" }, h("label", { for: "id_upload" }, "…or upload a .cu file: "), upload))),
    field("plan", "Launch plan (JSON)", plan, "Grid, block and shared memory as expressions over the task's sizes and tunables."),
    h("div", { class: "field-row" },
      field("budget", "Budget (evaluations)", budget),
      field("parallel", "Evaluations at once", parallel, "Up to one per GPU worker: each candidate is its own job on the GPU queue."),
      field("judge", "Judge", judge), field("seed", "Seed", seed),
      (me.teams ?? []).length ? field("team", "Team", team) : null),
    sourcesField,
    h("div", { class: "field field-screen" }, h("label", { class: "checkbox" }, screen, " Screen candidates first"),
      h("p", { class: "hint" }, "A cheap first look in one long-lived GPU process (fewer seeds and runs, no profile); "
        + "only candidates faster than the best get the full gate, and only those can be the best.")),
    h("div", { class: "actions" }, submit, " ", check, preflightStatus));
  fill(root, h("h1", null, "New session"), form);
  taskChanged();

  // Writing takes minutes (LLM rounds and nvcc): the POST queues a job, and the page reads
  // it until it ends, showing each attempt as it arrives.
  // The done writing job whose kernel went into the editor, for the run to name.
  /** @type {{id: number, task: string}|null} */
  let writtenJob = null;

  async function writeFromIntent() {
    showErrors({}, []);
    writtenJob = null;
    fill(attemptList);
    draft.disabled = true;
    draft.textContent = "Writing…";
    try {
      let job = await api("/api/kernels/write/", { method: "POST", body: { task: task.value, intent: intent.value } });
      for (let reads = 0; !writingEnded(job); reads += 1) {
        showWriting(job);
        await new Promise((resolve) => setTimeout(resolve, writingPollDelay(reads)));
        job = await api(job.url);
      }
      showWriting(job);
      if (job.status === "failed") {
        fill(drafted); // the reason goes by the intent, as a refused request's does; the attempts stay
        showErrors({ intent: [job.message] }, []);
        return;
      }
      writtenJob = { id: job.id, task: job.task };
      editor.setValue(job.written.source);
      plan.value = JSON.stringify(job.written.plan, null, 2);
      fill(drafted, writtenSummary(job.written));
    } catch (error) {
      if (error instanceof ApiError && error.status === 400) {
        const { fields, general: top } = fieldErrors(error.body, FIELDS);
        showErrors(fields, top);
      } else {
        showErrors({}, [`Could not write a kernel: ${error.message}`]);
      }
    } finally {
      draft.disabled = false;
      draft.textContent = "Write the kernel from the intent (LLM)";
    }
  }

  async function checkOnly() {
    showErrors({}, []);
    const { payload, errors: local } = runPayload({ task: task.value, source: editor.textarea.value, plan: plan.value,
      budget: budget.value, parallel: parallel.value, judge: judge.value, seed: seed.value });
    if (!payload) return showErrors(local, ["Please fix the fields marked below."]);
    check.disabled = true;
    try {
      await preflight(payload);
    } finally {
      check.disabled = false;
    }
  }

  /**
   * Ask the server what the gate would reject, and show it. True when the run may start:
   * nothing found, the server could not compile (it says so), or pre-flight itself could
   * not be asked (the run's own checks still apply).
   * @param {Record<string, any>} payload
   */
  async function preflight(payload) {
    fill(preflightStatus, "Pre-flight: checking the kernel and plan as the gate would…");
    let answer;
    try {
      answer = await api("/api/runs/preflight/", { method: "POST", body: preflightBody(payload) });
    } catch (error) {
      if (error instanceof ApiError && error.status === 400) {
        const { fields, general: top } = fieldErrors(error.body, FIELDS);
        fill(preflightStatus);
        showErrors(fields, top.length ? top : ["Please fix the fields marked below."]);
        return false;
      }
      fill(preflightStatus, `Pre-flight could not be asked (${error.message}); the run's own checks still apply.`);
      return true;
    }
    const view = preflightView(answer);
    fill(preflightStatus, view.status);
    editor.markLines(new Set(view.lines));
    if (view.ok) return true;
    showErrors(view.fields, [view.status]);
    for (const item of errors.source.querySelectorAll("li")) {
      const line = Number(/^line (\d+):/.exec(item.textContent ?? "")?.[1]);
      if (line) item.replaceChildren(h("button", { type: "button", class: "link", onclick: () => editor.goToLine(line) },
        `line ${line}`), (item.textContent ?? "").replace(/^line \d+/, ""));
    }
    return false;
  }

  function showWriting(job) {
    fill(drafted, writingStatusLine(job));
    fill(attemptList, (job.attempts ?? []).map((a) => {
      const row = attemptRow(a);
      return h("li", { "data-stage": row.stage, "data-passed": String(row.passed) }, row.text);
    }));
  }

  async function send(event) {
    event.preventDefault();
    showErrors({}, []);
    const { payload, errors: local } = runPayload({ task: task.value, source: editor.textarea.value, plan: plan.value,
      budget: budget.value, parallel: parallel.value, judge: judge.value, seed: seed.value, team: team.value, intent: intent.value,
      sources: sourceBoxes.every((b) => b.checked) ? null : sourceBoxes.filter((b) => b.checked).map((b) => b.value),
      screen: screen.checked, writingJob: writtenJob?.task === task.value ? writtenJob.id : null, evaluator: evaluator.value });
    if (!payload) return showErrors(local, ["Please fix the fields marked below."]);
    submit.disabled = true;
    submit.textContent = "Checking…";
    if (!await preflight(payload)) {
      submit.disabled = false;
      submit.textContent = "Start the search";
      return;
    }
    submit.textContent = "Starting…";
    try {
      const run = await api("/api/runs/", { method: "POST", body: payload });
      window.location.assign(`/runs/${run.id}/`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 400) {
        const { fields, general: top } = fieldErrors(error.body, FIELDS);
        showErrors(fields, top.length ? top : ["The server did not accept the run: see the fields marked below."]);
      } else {
        showErrors({}, [`Could not start the run: ${error.message}`]);
      }
      submit.disabled = false;
      submit.textContent = "Start the search";
    }
  }

  function showErrors(byField, top) {
    for (const name of FIELDS) {
      fill(errors[name], (byField[name] ?? []).map((m) => h("li", null, m)));
      const control = root.querySelector(`#id_${name}`);
      if (control) control.toggleAttribute("aria-invalid", Boolean(byField[name]?.length));
      if (control && byField[name]?.length) control.setAttribute("aria-describedby", `errors-${name}`);
    }
    fill(general, top.map((m) => h("p", null, m)));
    const first = root.querySelector("[aria-invalid]");
    if (first instanceof HTMLElement) first.focus();
    else if (top.length) general.scrollIntoView({ block: "nearest" });
  }
}
