import { describe, expect, it } from "vitest";
import { attemptRow, writingEnded, writingPollDelay, writingStatusLine } from "../src/transforms/writing.js";

// As GET /api/kernels/write/<id>/ answers while the experts repair a kernel nvcc refused.
const running = { status: "running", message: "", attempts: [
  { round: 0, writer: "qwen", experts: ["qwen", "hpc"], stage: "compile", passed: false,
    message: "line 3: expected a \";\"\nline 9: identifier \"x\" is undefined" }] };

describe("attemptRow", () => {
  it("names the writer, its helpers, where it stopped and the first line of what was said", () => {
    expect(attemptRow(running.attempts[0])).toEqual({ key: "0:qwen", stage: "compile", passed: false,
      text: "first kernel by qwen with hpc: stopped at compile (line 3: expected a \";\")" });
  });
  it("reads a repair by one model that nvcc accepted", () => {
    expect(attemptRow({ round: 2, writer: "llm:m", experts: ["llm:m"], stage: "compiled", message: "" }).text)
      .toBe("repair 2 by llm:m: stopped at compiled");
  });
});

describe("writingStatusLine", () => {
  it("says where the job stands, counting the attempts that arrived", () => {
    expect(writingStatusLine({ status: "queued", attempts: [] })).toBe("Queued: waiting for a worker to write it…");
    expect(writingStatusLine(running)).toBe("Writing · 1 attempt so far…");
    expect(writingStatusLine({ status: "running", attempts: [] })).toBe("Writing…");
    expect(writingStatusLine({ status: "failed", message: "its worker stopped" })).toBe("Nobody could write it: its worker stopped");
  });
  it("rejects a status it does not know", () => {
    expect(() => writingStatusLine({ status: "paused" })).toThrow(RangeError);
    expect(() => writingEnded({ status: "paused" })).toThrow(/unknown writing job status/);
  });
});

describe("writingEnded", () => {
  it("is true only once done or failed", () => {
    expect(["queued", "running", "done", "failed"].map((status) => writingEnded({ status })))
      .toEqual([false, false, true, true]);
  });
});

describe("writingPollDelay", () => {
  it("looks again quickly at first, then every four seconds at most", () => {
    const still = () => 0.5;
    expect([0, 1, 2, 10].map((n) => writingPollDelay(n, still))).toEqual([500, 750, 1125, 4000]);
  });
});
