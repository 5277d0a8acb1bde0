import { describe, expect, it } from "vitest";
import { backoffDelay } from "../src/transforms/backoff.js";

describe("backoffDelay", () => {
  it("doubles from the initial delay up to the cap", () => {
    const noJitter = { jitter: 0, initialMs: 100, maxMs: 1000 };
    expect([0, 1, 2, 3, 4, 10].map((a) => backoffDelay(a, noJitter))).toEqual([100, 200, 400, 800, 1000, 1000]);
  });
  it("spreads retries by the jitter fraction", () => {
    expect(backoffDelay(0, { initialMs: 1000, jitter: 0.2 }, () => 0)).toBe(800);
    expect(backoffDelay(0, { initialMs: 1000, jitter: 0.2 }, () => 0.999999)).toBe(1200);
  });
  it("rejects nonsense", () => {
    expect(() => backoffDelay(-1)).toThrow(RangeError);
    expect(() => backoffDelay(0, { factor: 0.5 })).toThrow(/factor/);
  });
});
