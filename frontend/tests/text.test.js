import { describe, expect, it } from "vitest";
import { diffStats, parseUnifiedDiff } from "../src/transforms/diff.js";
import { escapeHtml, highlightCuda, tokenizeCuda } from "../src/transforms/cuda.js";

const DIFF = `--- a/kernel.cu
+++ b/kernel.cu
@@ -1,4 +1,5 @@
 // relu
-extern "C" __global__ void relu(const float* x, float* y, int n) {
+extern "C" __global__ void __launch_bounds__(256)
+relu(const float* __restrict__ x, float* __restrict__ y, int n) {
     long long i = blockIdx.x;
\\ No newline at end of file
`;

describe("parseUnifiedDiff", () => {
  it("types each line and numbers old and new lines from the hunk header", () => {
    const lines = parseUnifiedDiff(DIFF);
    expect(lines.map((l) => l.kind)).toEqual(["file", "file", "hunk", "ctx", "del", "add", "add", "ctx", "meta"]);
    expect(lines[3]).toMatchObject({ oldLine: 1, newLine: 1, text: "// relu" });
    expect(lines[4]).toMatchObject({ oldLine: 2, newLine: null });
    expect(lines[6]).toMatchObject({ oldLine: null, newLine: 3 });
    expect(lines[7]).toMatchObject({ oldLine: 3, newLine: 4 });
    expect(diffStats(lines)).toEqual({ added: 2, removed: 1 });
  });
  it("reads no diff as no lines", () => {
    expect(parseUnifiedDiff("")).toEqual([]);
    expect(parseUnifiedDiff(null)).toEqual([]);
  });
});

describe("tokenizeCuda", () => {
  const source = `#include <cuda.h>
// one thread per element
__global__ void relu(const float* __restrict__ x, float4 *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; /* index */
  if (i < n) y[i] = fmaxf(x[i], 0.0f) + 1e-3f + 0x1F; s = "a#b";
}`;
  it("gives back the source exactly when the tokens are joined", () => {
    expect(tokenizeCuda(source).map((t) => t.text).join("")).toBe(source);
  });
  it("tells CUDA qualifiers, types, built-ins, numbers, comments and directives apart", () => {
    const typeOf = (text) => tokenizeCuda(source).find((t) => t.text === text)?.type;
    expect(typeOf("#include <cuda.h>")).toBe("preprocessor");
    expect(typeOf("// one thread per element")).toBe("comment");
    expect(typeOf("/* index */")).toBe("comment");
    expect(typeOf("__global__")).toBe("cuda");
    expect(typeOf("__restrict__")).toBe("cuda");
    expect(typeOf("float4")).toBe("type");
    expect(typeOf("blockIdx")).toBe("builtin");
    expect(typeOf("fmaxf")).toBe("builtin");
    expect(typeOf("if")).toBe("keyword");
    expect(typeOf("0.0f")).toBe("number");
    expect(typeOf("1e-3f")).toBe("number");
    expect(typeOf("0x1F")).toBe("number");
    expect(typeOf('"a#b"')).toBe("string");
    expect(typeOf("relu")).toBe("identifier");
  });
  it("escapes HTML in highlighted output", () => {
    expect(highlightCuda('if (a<b) s = "<x>";')).toBe('<span class="tok-keyword">if</span> <span class="tok-punctuation">(</span>a<span class="tok-punctuation">&lt;</span>b<span class="tok-punctuation">)</span> s <span class="tok-punctuation">=</span> <span class="tok-string">&quot;&lt;x&gt;&quot;</span><span class="tok-punctuation">;</span>');
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe("&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  });
});
