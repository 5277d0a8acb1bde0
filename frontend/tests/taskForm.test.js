import { describe, expect, it } from "vitest";
import { taskErrors, taskPayload } from "../src/transforms/taskForm.js";

const good = {
  name: " double-relu ", description: "", sizes: [{ name: "n", value: "1048576" }, { name: "", value: "" }],
  inputs: [{ name: "x", dtype: "float32", shape: "n", range: "" }],
  outputs: [{ name: "y", dtype: "float32", shape: "n", reference: " np.maximum(x, 0) * 2 " }],
};

describe("taskPayload", () => {
  it("builds the definition: numbers as numbers, shapes as lists, one reference per output", () => {
    expect(taskPayload(good)).toEqual({ errors: {}, payload: {
      name: "double-relu", sizes: { n: 1048576 },
      inputs: [{ name: "x", dtype: "float32", shape: ["n"] }],
      outputs: [{ name: "y", dtype: "float32", shape: ["n"] }],
      reference: { y: "np.maximum(x, 0) * 2" } } });
  });
  it("reads shapes with expressions, int32 ranges, tolerances, small sizes and formulas", () => {
    const { payload } = taskPayload({ ...good,
      sizes: [{ name: "M", value: "4096" }, { name: "N", value: "8192" }],
      inputs: [{ name: "x", dtype: "float32", shape: "M, N", range: "" }, { name: "k", dtype: "int32", shape: "M", range: "0, N" }],
      outputs: [{ name: "y", dtype: "float32", shape: "M, cdiv(N, 2)", reference: "x[:, ::2]" }],
      atol: "0", rtol: "1e-5", l0: "M=1, N=1\nM = 7, N=1031; M=3,N=33", flops: "M * N", bytes: "", team: "2" });
    expect(payload).toMatchObject({
      inputs: [{ shape: ["M", "N"] }, { dtype: "int32", shape: ["M"], range: [0, "N"] }],
      outputs: [{ shape: ["M", "cdiv(N, 2)"] }],
      tolerances: { float32: { atol: 0, rtol: 1e-5 } },
      l0_sizes: [{ M: 1, N: 1 }, { M: 7, N: 1031 }, { M: 3, N: 33 }], flops: "M * N", team: 2 });
    expect(payload).not.toHaveProperty("bytes");
  });
  it("reports every bad field in its own slot before anything is sent", () => {
    const { payload, errors } = taskPayload({ ...good, name: " ", sizes: [{ name: "n", value: "-3" }],
      inputs: [{ name: "k", dtype: "int32", shape: "n", range: "5" }],
      outputs: [{ name: "", dtype: "float32", shape: "", reference: "" }], atol: "-1", l0: "n:3" });
    expect(payload).toBeNull();
    expect(Object.keys(errors).sort()).toEqual(["inputs.0", "l0_sizes", "name", "outputs.0", "sizes", "tolerances"]);
    expect(errors["inputs.0"][0]).toMatch(/range: lo, hi/);
    expect(errors["outputs.0"]).toHaveLength(3);
  });
});

describe("taskErrors", () => {
  it("puts the harness's messages on the row or section they name", () => {
    const body = { inputs: ["inputs[1].shape: unknown name 'm'"], reference: ["reference.z: gives NaN"],
      tolerances: ["tolerances.float32.atol: a finite number >= 0"], name: ["name: exists already"] };
    expect(taskErrors(body, ["y", "z"])).toEqual({ general: [], slots: {
      "inputs.1": ["inputs[1].shape: unknown name 'm'"], "outputs.1": ["reference.z: gives NaN"],
      tolerances: ["tolerances.float32.atol: a finite number >= 0"], name: ["name: exists already"] } });
  });
  it("reads DRF's nested row errors and keeps the rest general", () => {
    const body = { outputs: [{}, { dtype: ['"complex64" is not a valid choice.'] }], detail: "Slow down." };
    expect(taskErrors(body, ["y", "z"])).toEqual({ general: ["Slow down."],
      slots: { "outputs.1": ['dtype: "complex64" is not a valid choice.'] } });
    expect(taskErrors("Bad Gateway", [])).toEqual({ slots: {}, general: ["Bad Gateway"] });
  });
});
