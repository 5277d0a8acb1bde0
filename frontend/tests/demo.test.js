// Demo runs and "not measured" nodes (issue 35): a node no verdict could be had for (no
// recording of it, no GPU) is drawn and named apart from a kernel the gate refused.
import { describe, expect, it } from "vitest";
import { runPayload } from "../src/transforms/forms.js";
import { statusClass } from "../src/transforms/rows.js";
import { COLOURS, nodeColourScale } from "../src/transforms/style.js";

const notMeasured = { id: 3, parentId: 0, state: "done", status: "error" };
const refused = { id: 4, parentId: 0, state: "done", status: "rejected" };

describe("a node that was not measured", () => {
  it("is its own class, not a failed kernel", () => {
    expect(statusClass(notMeasured)).toBe("unmeasured");
    expect(statusClass(refused)).toBe("failed");
  });

  it("is never drawn in the failed colour", () => {
    const colour = nodeColourScale([notMeasured, refused]);
    expect(colour(notMeasured)).toBe(COLOURS.unmeasured);
    expect(colour(notMeasured)).not.toBe(COLOURS.failed);
    expect(colour(refused)).toBe(COLOURS.failed);
  });
});

describe("the new-session payload", () => {
  const values = { task: "relu", source: "k", plan: "{}", budget: "30", judge: "rules", seed: "0" };

  it("asks for a demo run only when the form chose one", () => {
    expect(runPayload({ ...values, evaluator: "demo" }).payload?.evaluator).toBe("demo");
    expect(runPayload({ ...values, evaluator: "gate" }).payload).not.toHaveProperty("evaluator");
  });
});
