"""Run a candidate's CUDA source and launch plan on the CPU, one std::thread per CUDA thread.

For tests of generated kernels on a machine without a GPU. It executes the source text
the rewrites produce, at small sizes, and says nothing about speed or about the GPU's
memory model: blocks run one after another, the threads of a block run concurrently,
__syncthreads is a std::barrier (a thread that returns drops out of it, as on sm_70+),
the shuffles (__shfl_down_sync, __shfl_up_sync, __shfl_xor_sync, __shfl_sync) exchange values through a
per-warp slot array between two barriers, atomicAdd takes a mutex, and __shared__
becomes `static`, which the block's threads share (blocks never overlap in time).
float2/float4 with make_float*, the fast intrinsics (__expf, __logf, __fdividef,
rsqrtf, ...) as their precise libm counterparts, and __ldg are provided; 1-D blocks
(2-D ones for kernels without warp functions), 1-, 2- or 3-D grids. Only what the
kernels under test use is provided; anything else fails to compile,
loudly.
"""

from __future__ import annotations

import ctypes
import subprocess
from pathlib import Path

import numpy as np

from profiling.harness import expr
from profiling.harness.candidate import Candidate
from profiling.harness.checks import compare_values
from profiling.harness.spec import Task
from search.engine.rewrites.syntax import find_kernels, parse

POISON = np.float32(np.nan)  # outputs start as NaN, as in the harness: unwritten values show

SHIM = r"""
#include <math.h>
#include <cfloat>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

struct dim3 { unsigned x, y, z; };
thread_local dim3 threadIdx{0, 0, 0}, blockIdx{0, 0, 0};
dim3 blockDim{1, 1, 1}, gridDim{1, 1, 1};

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
template <typename T> inline T __ldg(const T* address) { return *address; }
// The fast intrinsics stand for their precise counterparts: the emulator checks the
// kernel's logic, and the task's tolerance is what must admit the hardware's error.
inline float __expf(float v) { return expf(v); }
// CUDA's float overloads of max/min and of the math functions (`exp(v)` on a float is expf)
inline float max(float a, float b) { return fmaxf(a, b); }
inline float min(float a, float b) { return fminf(a, b); }
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
using std::exp; using std::log; using std::sqrt; using std::tanh; using std::fabs;
inline float __logf(float v) { return logf(v); }
inline float __fdividef(float a, float b) { return a / b; }
inline float __frcp_rn(float v) { return 1.0f / v; }
inline float __fsqrt_rn(float v) { return sqrtf(v); }
inline float rsqrtf(float v) { return 1.0f / sqrtf(v); }

namespace emu {
std::barrier<>* block_barrier = nullptr;
std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
std::vector<uint64_t> warp_slots;  // 32 per warp
std::mutex atomic_mutex;
}

inline void __syncthreads() { emu::block_barrier->arrive_and_wait(); }

// Every lane of the warp publishes its value, then reads the one of lane `source(lane)`
// (its own where that lane is outside the warp), between two barriers of the warp.
template <typename T, typename Source> T emu_shuffle(T value, Source source) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "shuffled values are at most 8 bytes");
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    uint64_t* slots = &emu::warp_slots[warp * 32];
    std::memcpy(&slots[lane], &value, sizeof(T));
    emu::warp_barriers[warp]->arrive_and_wait();
    T result = value;
    const unsigned from = source(lane);
    if (from < 32 && warp * 32 + from < blockDim.x) std::memcpy(&result, &slots[from], sizeof(T));
    emu::warp_barriers[warp]->arrive_and_wait();
    return result;
}

template <typename T> T __shfl_down_sync(unsigned, T value, int offset) {
    return emu_shuffle(value, [offset](unsigned lane) { return lane + offset; });
}

// A lane below `offset` keeps its own value, as on the hardware.
template <typename T> T __shfl_up_sync(unsigned, T value, int offset) {
    return emu_shuffle(value, [offset](unsigned lane) {
        return lane >= (unsigned)offset ? lane - offset : 32u;
    });
}

template <typename T> T __shfl_xor_sync(unsigned, T value, int mask, int width = 32) {
    return emu_shuffle(value, [mask, width](unsigned lane) {
        const unsigned from = lane ^ mask;
        return (from / width == lane / width) ? from : lane;
    });
}

template <typename T> T __shfl_sync(unsigned, T value, int source, int width = 32) {
    return emu_shuffle(value, [source, width](unsigned lane) {
        return lane / width * width + source % width;
    });
}

inline void __syncwarp(unsigned = 0xFFFFFFFFu) { emu::warp_barriers[threadIdx.x / 32]->arrive_and_wait(); }

template <typename T> T atomicAdd(T* address, T value) {
    std::lock_guard<std::mutex> lock(emu::atomic_mutex);
    T old = *address;
    *address = old + value;
    return old;
}

void emu_launch(unsigned grid, unsigned grid_y, unsigned grid_z, unsigned block_x, unsigned block_y,
                const std::function<void()>& kernel) {
    gridDim = {grid, grid_y, grid_z};
    blockDim = {block_x, block_y, 1};
    const unsigned block = block_x * block_y;  // threads; warp functions assume block_y == 1
    const unsigned warps = (block + 31) / 32;
    emu::warp_slots.assign(warps * 32, 0);
    for (unsigned b = 0; b < grid * grid_y * grid_z; ++b) {
        std::barrier<> barrier(block);
        emu::block_barrier = &barrier;
        emu::warp_barriers.clear();
        for (unsigned w = 0; w < warps; ++w)
            emu::warp_barriers.emplace_back(new std::barrier<>(std::min(32u, block - 32 * w)));
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < block; ++t) {
            threads.emplace_back([&, t] {
                blockIdx = {b % grid, b / grid % grid_y, b / (grid * grid_y)};
                threadIdx = {t % block_x, t / block_x, 0};
                kernel();
                emu::warp_barriers[t / 32]->arrive_and_drop();
                emu::block_barrier->arrive_and_drop();
            });
        }
        for (auto& thread : threads) thread.join();
    }
}
"""

_CTYPES = {"float": ctypes.c_float, "double": ctypes.c_double, "int": ctypes.c_int,
           "long long": ctypes.c_longlong, "unsigned": ctypes.c_uint, "unsigned int": ctypes.c_uint,
           "size_t": ctypes.c_size_t, "int64_t": ctypes.c_int64, "long": ctypes.c_long,
           "unsigned long": ctypes.c_ulong, "unsigned long long": ctypes.c_ulonglong,
           "int32_t": ctypes.c_int32}


def _preprocessed(source: str, defines: list[str]) -> str:
    """The source as the compiler sees it (macros expanded, conditionals resolved), so that
    kernels whose signatures are spelt with macros or chosen by `#if` are found."""
    done = subprocess.run(["g++", "-E", "-P", "-x", "c++", *defines, "-D__launch_bounds__(...)=", "-"],
                          input=source, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else source  # the compile below says why


def _launchers(source: str) -> str:
    """extern "C" launch_<kernel>(grid, block, args): the kernel's call with typed arguments."""
    parts = []
    for kernel in find_kernels(parse(source)):
        args = ", ".join(f"{'' if p.pointer is not None else '*'}({p.base_type}*)args[{p.position}]"
                         for p in kernel.params)
        parts.append(f'extern "C" void launch_{kernel.name}(unsigned grid, unsigned grid_y, unsigned grid_z, '
                     f"unsigned block, unsigned block_y, void** args) {{\n"
                     f"    emu_launch(grid, grid_y, grid_z, block, block_y,\n"
                     f"               [=] {{ {kernel.name}({args}); }});\n}}\n")
    return "\n".join(parts)


class CpuKernels:
    """The candidate's source compiled with g++ against the shim; `run` executes its plan."""

    def __init__(self, candidate: Candidate, workdir: Path):
        self.candidate = candidate
        workdir.mkdir(parents=True, exist_ok=True)
        source = workdir / "kernels.cpp"
        defines = [f"-D{name}={value}" for name, value in sorted(candidate.tunables.items())]
        expanded = _preprocessed(candidate.source, defines)
        launchers = _launchers(expanded)
        source.write_text(f"{SHIM}\n#line 1 \"candidate.cu\"\n{candidate.source}\n{launchers}")
        library = workdir / "kernels.so"
        subprocess.run(["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", *defines, str(source),
                        "-o", str(library)], check=True, capture_output=True, text=True)
        self.library = ctypes.CDLL(str(library))
        self.kernels = {k.name: k for k in find_kernels(parse(expanded))}

    def run(self, task: Task, sizes: dict[str, int], inputs: dict[str, np.ndarray],
            grids: dict[str, int] | None = None) -> dict[str, np.ndarray]:
        """Every launch of the plan in order; the outputs. `grids` overrides a kernel's grid."""
        names = {**sizes, **self.candidate.tunables}
        buffers = {name: np.array(values, copy=True) for name, values in inputs.items()}
        for spec in task.outputs:
            buffers[spec.name] = np.full(spec.resolve_shape(sizes), POISON, dtype=spec.numpy_dtype())
        for scratch in self.candidate.scratch:
            kind = np.dtype(scratch.dtype)  # as the plan declares it (float32, int32, int64, ...)
            buffers[scratch.name] = np.full(expr.evaluate_int(scratch.count, names),
                                            POISON if kind.kind == "f" else -1, dtype=kind)
        for launch in self.candidate.launches:
            kernel = self.kernels[launch.kernel]
            values = [self._argument(param.base_type, arg, buffers, names)
                      for param, arg in zip(kernel.params, launch.args, strict=True)]
            pointers = (ctypes.c_void_p * len(values))(
                *[v.value if isinstance(v, ctypes.c_void_p) else ctypes.addressof(v) for v in values])
            grid = (grids or {}).get(launch.kernel) or expr.evaluate_int(launch.grid[0], names)
            grid_y = expr.evaluate_int(launch.grid[1], names) if len(launch.grid) > 1 else 1
            grid_z = expr.evaluate_int(launch.grid[2], names) if len(launch.grid) > 2 else 1
            block = expr.evaluate_int(launch.block[0], names)
            block_y = expr.evaluate_int(launch.block[1], names) if len(launch.block) > 1 else 1
            launcher = getattr(self.library, f"launch_{launch.kernel}")
            launcher(ctypes.c_uint(grid), ctypes.c_uint(grid_y), ctypes.c_uint(grid_z), ctypes.c_uint(block),
                     ctypes.c_uint(block_y), pointers)
        return {spec.name: buffers[spec.name] for spec in task.outputs}

    @staticmethod
    def _argument(kind: str, arg: str | int, buffers: dict[str, np.ndarray], names: dict[str, int]):
        if isinstance(arg, str) and arg in buffers:
            return ctypes.c_void_p(buffers[arg].ctypes.data)
        value = str(arg)
        value = value.split(":", 1)[1] if value[:4] in ("f32:", "i64:", "i32:") else value
        number = float(value) if kind in ("float", "double") else expr.evaluate_int(value, names)
        return _CTYPES[kind](number)


def mismatch(task: Task, sizes: dict[str, int], inputs: dict[str, np.ndarray],
             outputs: dict[str, np.ndarray]) -> str | None:
    """Why the outputs differ from the task's reference beyond its tolerance, or None."""
    expected = task.reference(inputs, sizes)
    compare = task.comparison()
    if compare is not None:
        found = compare(outputs, expected, inputs, sizes)
        return None if found is None else f"{found.output}: {found.message}"
    for name, ref in expected.items():
        failure, _, _ = compare_values(name, outputs[name], ref, task.tolerance_for(str(ref.dtype)))
        if failure is not None:
            return f"{name}: {failure}"
    return None


def mismatch_at_l0(task: Task, candidate: Candidate, workdir: Path) -> str | None:
    """Why the candidate, run on the emulator at each of the task's L0 sizes, differs from
    the task's reference (the first size where it does, named), or None."""
    kernels = CpuKernels(candidate, workdir)
    for sizes in task.l0_sizes:
        inputs = inputs_for(task, sizes)
        found = mismatch(task, sizes, inputs, kernels.run(task, sizes, inputs))
        if found is not None:
            return f"at {sizes}: {found}"
    return None


def skeleton_mismatch(source: str, plan: dict, task: Task, skeleton: str, workdir: Path) -> str | None:
    """Lift the kernel, emit `skeleton` from its form, and run both the kernel as written
    and the skeleton's on the emulator at the task's L0 sizes: why one of them differs from
    the reference (or the skeleton refused), or None."""
    from search.engine import forms
    from search.engine.forms.skeletons import by_name

    emitted = by_name(skeleton).emit(forms.lift(source, plan), plan, task)
    if isinstance(emitted, str):
        return f"{skeleton} refused: {emitted}"
    for name, candidate in (("naive", Candidate.from_source_and_plan(source, plan)),
                            ("skeleton", Candidate.from_source_and_plan(emitted.source, emitted.plan))):
        found = mismatch_at_l0(task, candidate, workdir / name)
        if found is not None:
            return f"{name} {found}"
    return None


def inputs_for(task: Task, sizes: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {spec.name: spec.make(rng, sizes, "heavy_tailed") for spec in task.inputs}
