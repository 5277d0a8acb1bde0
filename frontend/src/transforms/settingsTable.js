// The compare page's table of settings and tunables (GET /api/runs/compare/ `settings`,
// search.comparison): each row's values in words, and whether the runs differ there.

/**
 * @typedef {{group: string, name: string, unit: string, values: any[], differs: boolean}} SettingRow
 * @typedef {{group: string, name: string, cells: string[], differs: boolean}} SettingLine
 */

/**
 * One value in words: a list joined ("none" when empty), on/off for a switch, a number
 * with its unit, and "—" for a tunable the run's best kernel does not have.
 * @param {any} value @param {string} unit
 */
export function settingText(value, unit = "") {
  if (value == null) return "—";
  if (Array.isArray(value)) return value.length ? value.join(", ") : "none";
  if (typeof value === "boolean") return value ? "on" : "off";
  if (typeof value === "number") return unit ? `${Number(value.toPrecision(6))} ${unit}` : String(value);
  return String(value);
}

/**
 * The table's lines, settings first, then tunables, in the server's order.
 * @param {SettingRow[]} rows
 * @returns {SettingLine[]}
 */
export function settingLines(rows) {
  if (!Array.isArray(rows)) throw new TypeError(`settings must be a list of rows, got ${JSON.stringify(rows)}`);
  const order = { settings: 0, tunables: 1 };
  return [...rows]
    .sort((a, b) => (order[a.group] ?? 2) - (order[b.group] ?? 2))
    .map((row) => ({ group: row.group, name: row.name, cells: row.values.map((v) => settingText(v, row.unit)),
      differs: Boolean(row.differs) }));
}

/** "2 of 9 settings differ" and the like, for the table's caption. @param {SettingLine[]} lines */
export function differencesText(lines) {
  const differ = lines.filter((line) => line.differs).length;
  if (!differ) return "The runs were set up alike, and their best kernels have the same tunables.";
  return `${differ} of ${lines.length} rows differ (marked ≠).`;
}
