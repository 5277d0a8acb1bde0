import { describe, expect, it } from "vitest";
import { checkOptions, OptionError } from "../src/transforms/options.js";

/** @type {Record<string, import("../src/transforms/options.js").OptionSpec>} */
const schema = {
  width: { type: "number", default: 10, min: 1 },
  mode: { type: "string", default: "a", oneOf: ["a", "b"] },
  only: { type: "set", default: undefined, nullable: true },
};

describe("checkOptions", () => {
  it("fills in defaults", () => {
    expect(checkOptions("t", {}, schema)).toEqual({ width: 10, mode: "a", only: null });
  });
  it("rejects an unknown option and names the known ones", () => {
    expect(() => checkOptions("t", { widht: 3 }, schema)).toThrow(/unknown option "widht" \(known: width, mode, only\)/);
  });
  it("rejects a wrong type, a value out of range and one not among the choices", () => {
    expect(() => checkOptions("t", { width: "3" }, schema)).toThrow(OptionError);
    expect(() => checkOptions("t", { width: 0 }, schema)).toThrow(/at least 1/);
    expect(() => checkOptions("t", { mode: "c" }, schema)).toThrow(/one of "a", "b"/);
    expect(() => checkOptions("t", { only: [1] }, schema)).toThrow(/must be a set/);
  });
});
