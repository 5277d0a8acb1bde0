// Unified diffs (`diff -u`, git) as typed lines with old/new line numbers.

/**
 * @typedef {{kind: "file"|"hunk"|"add"|"del"|"ctx"|"meta", text: string,
 *   oldLine: number|null, newLine: number|null}} DiffLine
 */

const HUNK = /^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@/;

/**
 * @param {string|null|undefined} text
 * @returns {DiffLine[]}
 */
export function parseUnifiedDiff(text) {
  if (!text) return [];
  if (typeof text !== "string") throw new TypeError(`a diff must be text, got ${typeof text}`);
  /** @type {DiffLine[]} */
  const lines = [];
  let oldLine = 0, newLine = 0, inHunk = false;
  const raw = text.replace(/\n$/, "").split("\n");
  for (const line of raw) {
    const hunk = HUNK.exec(line);
    if (hunk) {
      oldLine = Number(hunk[1]);
      newLine = Number(hunk[2]);
      inHunk = true;
      lines.push({ kind: "hunk", text: line, oldLine: null, newLine: null });
    } else if (!inHunk || line.startsWith("--- ") || line.startsWith("+++ ") || line.startsWith("diff ")) {
      const kind = line.startsWith("--- ") || line.startsWith("+++ ") || line.startsWith("diff ") ? "file" : "meta";
      if (kind === "file") inHunk = false;
      lines.push({ kind, text: line, oldLine: null, newLine: null });
    } else if (line.startsWith("+")) {
      lines.push({ kind: "add", text: line.slice(1), oldLine: null, newLine: newLine++ });
    } else if (line.startsWith("-")) {
      lines.push({ kind: "del", text: line.slice(1), oldLine: oldLine++, newLine: null });
    } else if (line.startsWith("\\")) {
      lines.push({ kind: "meta", text: line, oldLine: null, newLine: null }); // "\ No newline at end of file"
    } else {
      lines.push({ kind: "ctx", text: line.slice(1), oldLine: oldLine++, newLine: newLine++ });
    }
  }
  return lines;
}

/** @param {DiffLine[]} lines */
export function diffStats(lines) {
  let added = 0, removed = 0;
  for (const line of lines) {
    if (line.kind === "add") added += 1;
    else if (line.kind === "del") removed += 1;
  }
  return { added, removed };
}
