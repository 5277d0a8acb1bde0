import { describe, expect, it } from "vitest";
import { differencesText, settingLines, settingText } from "../src/transforms/settingsTable.js";

const rows = [
  { group: "tunables", name: "BLOCK", unit: "", values: [512, 256], differs: true },
  { group: "settings", name: "budget", unit: "evaluations", values: [3, 3], differs: false },
  { group: "settings", name: "time limit", unit: "s", values: [120, 600], differs: true },
  { group: "settings", name: "sources", unit: "", values: [["tunable", "rewrite"], []], differs: true },
  { group: "settings", name: "screen", unit: "", values: [true, false], differs: true },
  { group: "tunables", name: "UNROLL", unit: "", values: [null, 4], differs: true },
];

describe("the compare page's settings table", () => {
  it("puts settings before tunables and writes each value in words", () => {
    const lines = settingLines(rows);
    expect(lines.map((line) => line.name)).toEqual(["budget", "time limit", "sources", "screen", "BLOCK", "UNROLL"]);
    expect(lines.map((line) => line.cells)).toEqual([
      ["3 evaluations", "3 evaluations"], ["120 s", "600 s"], ["tunable, rewrite", "none"], ["on", "off"],
      ["512", "256"], ["—", "4"]]);
    expect(lines.map((line) => line.differs)).toEqual([false, true, true, true, true, true]);
  });
  it("says how many rows differ, or that the runs were set up alike", () => {
    expect(differencesText(settingLines(rows))).toBe("5 of 6 rows differ (marked ≠).");
    expect(differencesText(settingLines([rows[1]]))).toMatch(/set up alike/);
  });
  it("refuses settings that are not a list", () => {
    expect(() => settingLines(/** @type {any} */ ({}))).toThrow(TypeError);
    expect(settingText(0.1 + 0.2, "s")).toBe("0.3 s");
  });
});
