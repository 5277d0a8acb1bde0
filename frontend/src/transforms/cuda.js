// A small CUDA C++ tokenizer for syntax colouring: enough to tell comments, strings,
// preprocessor lines, numbers, keywords, CUDA qualifiers and built-ins apart. Not a
// parser: anything it does not know is plain text, and joining the tokens gives back
// the source exactly.

/** @typedef {{type: "comment"|"string"|"preprocessor"|"number"|"keyword"|"type"|"cuda"|"builtin"|"identifier"|"punctuation"|"space"|"text", text: string}} Token */

const KEYWORDS = new Set(("auto break case catch class const constexpr continue default delete do else enum explicit " +
  "extern false for friend goto if inline mutable namespace new noexcept nullptr operator private protected " +
  "public register return sizeof static static_assert static_cast reinterpret_cast const_cast dynamic_cast " +
  "struct switch template this throw true try typedef typename union using virtual volatile while").split(" "));
const TYPES = new Set(("void bool char short int long float double signed unsigned size_t int8_t int16_t int32_t " +
  "int64_t uint8_t uint16_t uint32_t uint64_t half half2 __half __half2 __nv_bfloat16 __nv_bfloat162 " +
  "float2 float3 float4 double2 int2 int3 int4 uint2 uint3 uint4 char4 uchar4 dim3").split(" "));
const CUDA = new Set(("__global__ __device__ __host__ __shared__ __constant__ __managed__ __restrict__ " +
  "__launch_bounds__ __forceinline__ __noinline__ __align__ __grid_constant__").split(" "));
const BUILTINS = new Set(("threadIdx blockIdx blockDim gridDim warpSize __syncthreads __syncwarp __threadfence " +
  "__shfl_sync __shfl_down_sync __shfl_up_sync __shfl_xor_sync __ballot_sync __any_sync __all_sync " +
  "__ldg __fdividef __expf __logf __sinf __cosf __powf __fmaf_rn __float2half __half2float " +
  "atomicAdd atomicMax atomicMin atomicCAS atomicExch fmaxf fminf expf logf sqrtf rsqrtf fabsf " +
  "tanhf erff powf fmaf max min").split(" "));

const RULES = /** @type {const} */ ([
  ["comment", /\/\/[^\n]*|\/\*[\s\S]*?(?:\*\/|$)/y],
  ["preprocessor", /#[ \t]*[A-Za-z_]\w*(?:\\\n|[^\n])*/y],
  ["string", /"(?:\\.|[^"\\\n])*"?|'(?:\\.|[^'\\\n])*'?/y],
  ["number", /(?:0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)[uUlLfF]*/y],
  ["word", /[A-Za-z_]\w*/y],
  ["space", /\s+/y],
  ["punctuation", /[{}()[\];,.<>=+\-*/%&|^!~?:]/y],
]);

/**
 * @param {string} source
 * @returns {Token[]}
 */
export function tokenizeCuda(source) {
  if (typeof source !== "string") throw new TypeError(`source must be a string, got ${typeof source}`);
  /** @type {Token[]} */
  const tokens = [];
  let at = 0;
  // A preprocessor directive only starts a line; elsewhere '#' is plain text.
  let lineStart = true;
  while (at < source.length) {
    let matched = false;
    for (const [type, pattern] of RULES) {
      if (type === "preprocessor" && !lineStart) continue;
      pattern.lastIndex = at;
      const m = pattern.exec(source);
      if (!m || m[0].length === 0) continue;
      const text = m[0];
      push(tokens, type === "word" ? classifyWord(text) : type, text);
      at += text.length;
      matched = true;
      break;
    }
    if (!matched) {
      push(tokens, "text", source[at]);
      at += 1;
    }
    const last = tokens[tokens.length - 1];
    lineStart = last.type === "space" ? lineStart || last.text.includes("\n") : false;
  }
  return tokens;
}

function classifyWord(word) {
  if (CUDA.has(word)) return "cuda";
  if (TYPES.has(word)) return "type";
  if (KEYWORDS.has(word)) return "keyword";
  if (BUILTINS.has(word)) return "builtin";
  return "identifier";
}

function push(tokens, type, text) {
  const last = tokens[tokens.length - 1];
  // Adjacent plain pieces merge, which keeps the HTML small.
  if (last && last.type === type && (type === "text" || type === "punctuation" || type === "space")) last.text += text;
  else tokens.push({ type, text });
}

const ESCAPES = /** @type {Record<string, string>} */ ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" });

/** @param {string} text */
export function escapeHtml(text) {
  return text.replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/**
 * Highlighted HTML for a <pre><code>: one <span class="tok-TYPE"> per token that has a
 * colour, everything escaped.
 * @param {string} source
 */
export function highlightCuda(source) {
  return tokenizeCuda(source).map(({ type, text }) => {
    const safe = escapeHtml(text);
    return type === "space" || type === "identifier" || type === "text" ? safe : `<span class="tok-${type}">${safe}</span>`;
  }).join("");
}
