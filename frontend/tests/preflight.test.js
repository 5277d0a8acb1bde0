import { describe, expect, it } from "vitest";
import { lineRange, preflightBody, preflightView } from "../src/transforms/preflight.js";

describe("preflightBody", () => {
  it("sends the task, kernel and plan of the run, nothing else", () => {
    expect(preflightBody({ task: "relu", source: "k", plan: { launches: [] }, budget: 3, seed: 0 }))
      .toEqual({ task: "relu", source: "k", plan: { launches: [] } });
  });
});

describe("preflightView", () => {
  it("puts each compile error on its field and its line, and stops the run", () => {
    const view = preflightView({ ok: false, not_compiled: "", findings: [
      { field: "source", line: 4, message: "identifier \"fmaxx\" is undefined" },
      { field: "source", line: 4, message: "line 4: a second one" },
      { field: "source", line: 9, message: "expected a \";\"" }] });
    expect(view.ok).toBe(false);
    expect(view.fields.source).toEqual(["line 4: identifier \"fmaxx\" is undefined", "line 4: a second one",
      "line 9: expected a \";\""]);
    expect(view.lines).toEqual([4, 9]);
    expect(view.status).toMatch(/3 problems.*no run was created/);
  });
  it("keeps a plan problem on the plan, with no line to mark", () => {
    const view = preflightView({ ok: false, not_compiled: "", findings: [
      { field: "plan", line: null, message: "launch plan: block [4096, 1, 1] exceeds the limits" }] });
    expect(view.fields).toEqual({ plan: ["launch plan: block [4096, 1, 1] exceeds the limits"] });
    expect(view.lines).toEqual([]);
    expect(view.status).toMatch(/a problem/);
  });
  it("says it could not compile without nvcc, and lets the run start", () => {
    const view = preflightView({ ok: true, findings: [], not_compiled: "nvcc is not installed on this host" });
    expect(view.ok).toBe(true);
    expect(view.status).toMatch(/could not compile the kernel: nvcc is not installed.*the run may start/);
  });
  it("says what passed when nothing is found", () => {
    expect(preflightView({ ok: true, findings: [], not_compiled: "" }).status).toMatch(/compiles and the plan fits/);
  });
});

describe("lineRange", () => {
  it("finds a line's start and end, the last without a newline too", () => {
    const text = "a\nbcd\n\nef";
    expect(lineRange(text, 1)).toEqual([0, 1]);
    expect(lineRange(text, 2)).toEqual([2, 5]);
    expect(lineRange(text, 3)).toEqual([6, 6]);
    expect(lineRange(text, 4)).toEqual([7, 9]);
    expect(lineRange(text, 9)).toEqual([9, 9]);
  });
});
