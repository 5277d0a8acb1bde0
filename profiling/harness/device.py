"""The only module that talks to the GPU (through pycuda; the driver's virtual memory
management through vmm.py). Imported by the worker alone.

Every buffer is allocated with a canary region on both sides, and where the driver allows
in an address range of its own between unmapped guard regions (buffers.py); outputs and
scratch are poisoned before each launch. Launch plans are resolved into prepared calls once, with
their limits checked against the device before anything runs.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pycuda.driver as cuda

from . import expr, signature
from .buffers import Buffer, GuardedRanges
from .candidate import Candidate, CandidateError
from .preflight import MAX_GRID

L2_FLUSH_BYTES = 256 * 1024 * 1024  # > 4x the H200's 60 MB L2, as in GPU.md's method


class PlanError(ValueError):
    """The plan does not fit the kernels or the device; `guard` says which check."""

    def __init__(self, guard: str, message: str):
        super().__init__(message)
        self.guard = guard


class Gpu:
    def __init__(self) -> None:
        cuda.init()
        self.device = cuda.Device(0)
        self.context = self.device.make_context()
        self.stream = cuda.Stream()
        self.name = self.device.name()
        attr = cuda.device_attribute
        self.max_shared_optin = self.device.get_attribute(attr.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        self.max_threads = self.device.get_attribute(attr.MAX_THREADS_PER_BLOCK)
        self._flush = cuda.mem_alloc(L2_FLUSH_BYTES)
        self._flush_count = 0
        # Where the candidates' buffers go (None: canaries only), and the verdict's words for it
        self.ranges, self.buffers_evidence = GuardedRanges.open()

    def environment(self) -> dict[str, str]:
        driver = cuda.get_driver_version()
        return {"gpu": self.name, "cuda": ".".join(map(str, cuda.get_version())),
                "driver_api": f"{driver // 1000}.{driver % 1000 // 10}"}

    def free_bytes(self) -> int:
        return cuda.mem_get_info()[0]

    def flush_l2(self) -> None:
        """Overwrite more than the L2 holds, so the next run reads from DRAM."""
        self._flush_count += 1
        cuda.memset_d32_async(self._flush, self._flush_count, L2_FLUSH_BYTES // 4, self.stream)

    def synchronize(self) -> None:
        self.context.synchronize()

    def close(self) -> None:
        self.context.pop()


@dataclass
class SeedOnGpu:
    inputs: dict[str, cuda.DeviceAllocation]
    reference: dict[str, cuda.DeviceAllocation]
    # (allocation, bytes, keyed checksum at upload) for every array above
    sums: list[tuple[cuda.DeviceAllocation, int, int]]
    # The host's reference (and allowance), kept for a seed drawn on the GPU: its cache
    # entry is found by the draws' checksum, and a later candidate draws nothing.
    host_reference: Mapping[str, np.ndarray] | None = None


class ResidentSeeds:
    """A serving worker's L1 seeds on the GPU: inputs and reference outputs, uploaded once
    and shared by the candidates it screens (the two most recent seeds are kept).

    They live beside the candidates' buffers in one CUDA context, where a kernel that
    writes far outside its own buffers can reach them. So each array's keyed checksum
    (optiml_keyed_checksum, with a key drawn from the OS for this process) is taken at
    upload, and `verify` recomputes them: the worker verifies after every candidate and
    before passing one whose check read a seed, and a changed seed is dropped, so the
    next candidate that needs it uploads it again from the host.
    """

    KEEP = 2

    def __init__(self) -> None:
        self._seeds: dict[tuple, SeedOnGpu] = {}
        self._key = secrets.randbits(64)

    def find(self, key: tuple) -> SeedOnGpu | None:
        return self._seeds.get(key)

    def get(self, key: tuple, inputs: Mapping[str, np.ndarray],
            reference: Mapping[str, np.ndarray], harness: cuda.Module, gpu: Gpu, *,
            keep_host_reference: bool = False) -> SeedOnGpu:
        """The seed kept under `key`, uploaded from these arrays first if it is not (and
        with `keep_host_reference`, `reference` kept as its host_reference)."""
        if key not in self._seeds:
            while len(self._seeds) >= self.KEEP:
                self._free(self._seeds.pop(next(iter(self._seeds))))
            ins = {n: _upload(a) for n, a in inputs.items()}
            refs = {n: _upload(a) for n, a in reference.items()}
            sums = [(allocation, array.nbytes, 0) for allocation, array in
                    [*zip(ins.values(), inputs.values(), strict=True),
                     *zip(refs.values(), reference.values(), strict=True)]]
            sums = [(a, n, keyed_checksum(harness, gpu, a, n, self._key)) for a, n, _ in sums]
            self._seeds[key] = SeedOnGpu(ins, refs, sums, reference if keep_host_reference else None)
        return self._seeds[key]

    def intact(self, seed: SeedOnGpu, harness: cuda.Module, gpu: Gpu) -> bool:
        """Whether every byte of the seed is still what was uploaded."""
        return all(keyed_checksum(harness, gpu, a, n, self._key) == expected
                   for a, n, expected in seed.sums)

    def verify(self, harness: cuda.Module, gpu: Gpu) -> list[tuple]:
        """The keys of seeds whose bytes changed since upload; those are dropped."""
        corrupted = [key for key, seed in self._seeds.items() if not self.intact(seed, harness, gpu)]
        for key in corrupted:
            self._free(self._seeds.pop(key))
        return corrupted

    def clear(self) -> None:
        for seed in self._seeds.values():
            self._free(seed)
        self._seeds.clear()

    @staticmethod
    def _free(seed: SeedOnGpu) -> None:
        for allocation in (*seed.inputs.values(), *seed.reference.values()):
            allocation.free()


def keyed_checksum(harness: cuda.Module, gpu: Gpu, allocation, nbytes: int, key: int) -> int:
    out = _reduce(harness, gpu, "optiml_keyed_checksum", np.uint64, 1,
                  np.uintp(int(allocation)), np.uint64(nbytes), np.uint64(key))
    return int(out[0])


def _reduce(harness: cuda.Module, gpu: Gpu, kernel: str, dtype, count: int, *args) -> np.ndarray:
    """Run one of the harness's reductions (refresh.cu) into `count` zeroed words of
    `dtype`, its last argument, and read them back."""
    out = np.zeros(count, dtype)
    result = cuda.mem_alloc(out.nbytes)
    cuda.memset_d8(result, 0, out.nbytes)
    harness.get_function(kernel)(*args, result, grid=COMPARE_GRID, block=COMPARE_BLOCK,
                                 stream=gpu.stream)
    gpu.synchronize()
    cuda.memcpy_dtoh(out, result)
    result.free()
    return out


def download(allocation: cuda.DeviceAllocation, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    out = np.empty(shape, dtype=dtype)
    if out.nbytes:
        cuda.memcpy_dtoh(out, allocation)
    return out


def _upload(array: np.ndarray) -> cuda.DeviceAllocation:
    allocation = cuda.mem_alloc(max(1, array.nbytes))
    if array.nbytes:
        cuda.memcpy_htod(allocation, np.ascontiguousarray(array))
    return allocation


COMPARE_GRID, COMPARE_BLOCK = (1024, 1, 1), (256, 1, 1)


def count_differences(harness: cuda.Module, gpu: Gpu, buffer: Buffer,
                      copy: cuda.DeviceAllocation) -> int:
    """How many words of the buffer differ from the copy (0: bit for bit the same)."""
    counts = _reduce(harness, gpu, "optiml_count_differences", np.uint32, 4,
                     np.uintp(buffer.ptr), np.uintp(int(copy)), np.uint64(buffer.nbytes))
    return int(counts[0])


def compare_f32(harness: cuda.Module, gpu: Gpu, out: Buffer, reference: cuda.DeviceAllocation,
                atol: float, rtol: float) -> tuple[int, int, float, float]:
    """(unwritten elements, elements outside tolerance, max abs error, max rel error)."""
    counts = _reduce(harness, gpu, "optiml_compare_f32", np.uint32, 4,
                     np.uintp(out.ptr), np.uintp(int(reference)), np.uint64(out.nbytes // 4),
                     np.float64(atol), np.float64(rtol))
    floats = counts[2:].view(np.float32)
    return int(counts[0]), int(counts[1]), float(floats[0]), float(floats[1])


def within_allowance_f32(harness: cuda.Module, gpu: Gpu, out: Buffer, reference: cuda.DeviceAllocation,
                         allowed: cuda.DeviceAllocation | None, allowed_all: float
                         ) -> tuple[int, int, float, float]:
    """(unwritten elements, elements beyond their allowance, max abs error, max rel error):
    `allowed` a float64 per element, or None for `allowed_all` everywhere."""
    counts = _reduce(harness, gpu, "optiml_within_allowance_f32", np.uint32, 4,
                     np.uintp(out.ptr), np.uintp(int(reference)),
                     np.uintp(int(allowed) if allowed is not None else 0), np.float64(allowed_all),
                     np.uint64(out.nbytes // 4))
    floats = counts[2:].view(np.float32)
    return int(counts[0]), int(counts[1]), float(floats[0]), float(floats[1])


@dataclass
class ResolvedLaunch:
    kernel: str
    function: cuda.Function
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared: int
    values: list


def resolve_plan(gpu: Gpu, module: cuda.Module, candidate: Candidate, sizes: Mapping[str, int],
                 buffers: Mapping[str, Buffer]) -> list[ResolvedLaunch]:
    names = {**sizes, **candidate.tunables}
    resolved = []
    for index, launch in enumerate(candidate.launches):
        where = f"launch {index} ({launch.kernel})"
        try:
            function = module.get_function(launch.kernel)
        except cuda.LogicError:
            raise PlanError("plan", f"{where}: the cubin has no extern \"C\" kernel "
                                    f"named {launch.kernel!r}") from None
        try:
            grid = _dims(launch.grid, names)
            block = _dims(launch.block, names)
            shared = expr.evaluate_int(launch.shared_bytes, names)
            formats, values = zip(*(_arg(a, names, buffers) for a in launch.args), strict=True) \
                if launch.args else ((), ())
        except (expr.ExpressionError, CandidateError) as error:
            raise PlanError("plan", f"{where}: {error}") from None
        _check_limits(gpu, function, where, grid, block, shared)
        if shared > 48 * 1024:  # beyond 48 KB dynamic shared memory must be opted into
            function.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, shared)
        function.prepare("".join(formats))
        resolved.append(ResolvedLaunch(launch.kernel, function, grid, block, shared, list(values)))
    return resolved


def launch_all(launches: list[ResolvedLaunch], stream: cuda.Stream) -> None:
    for launch in launches:
        launch.function.prepared_async_call(
            launch.grid, launch.block, stream, *launch.values, shared_size=launch.shared)


def _dims(dims: tuple, names: Mapping[str, int]) -> tuple[int, int, int]:
    values = [expr.evaluate_int(d, names) for d in dims]
    return tuple(values + [1] * (3 - len(values)))  # type: ignore[return-value]


def _arg(arg, names: Mapping[str, int], buffers: Mapping[str, Buffer]) -> tuple[str, object]:
    """One argument packed as the kernel's signature was checked to take it: one decision
    (signature.argument_kind) for the packer and the check."""
    kind = signature.argument_kind(arg, buffers)
    if kind == signature.F32:
        return "f", np.float32(arg if isinstance(arg, float) else float(arg[4:]))
    if kind == signature.POINTER:
        return "P", buffers[arg].ptr
    if kind == signature.I64:
        return "q", np.int64(expr.evaluate_int(arg[4:], names))
    value = expr.evaluate_int(arg[4:] if isinstance(arg, str) and arg.startswith("i32:") else arg,
                              names)
    if not -(2**31) <= value < 2**31:
        raise CandidateError(f"argument {arg!r} = {value} does not fit in 32 bits; write 'i64:{arg}'")
    return "i", np.int32(value)


def _check_limits(gpu: Gpu, function: cuda.Function, where: str, grid, block, shared) -> None:
    attr = cuda.function_attribute
    threads = block[0] * block[1] * block[2]
    if min(grid) < 1 or min(block) < 1:
        raise PlanError("plan", f"{where}: grid {grid} and block {block} must be positive")
    if any(g > m for g, m in zip(grid, MAX_GRID, strict=True)):
        raise PlanError("resources", f"{where}: grid {grid} exceeds the limits {MAX_GRID}")
    allowed = function.get_attribute(attr.MAX_THREADS_PER_BLOCK)
    if threads > allowed:
        registers = function.get_attribute(attr.NUM_REGS)
        raise PlanError("resources", f"{where}: {threads} threads per block, but with {registers} "
                                     f"registers per thread this kernel allows at most {allowed}")
    static = function.get_attribute(attr.SHARED_SIZE_BYTES)
    if shared < 0 or static + shared > gpu.max_shared_optin:
        raise PlanError("resources", f"{where}: {static} B static + {shared} B dynamic shared "
                                     f"memory exceeds the {gpu.max_shared_optin} B a block may have")


def count_poison_async(harness: cuda.Module, gpu: Gpu, out: Buffer, counts, run: int) -> None:
    """counts[run] += the poisoned 4-byte words left in `out` (queued on the stream)."""
    harness.get_function("optiml_count_poison")(
        np.uintp(out.ptr), np.uint64(out.nbytes // 4), counts, np.uint32(run),
        grid=COMPARE_GRID, block=COMPARE_BLOCK, stream=gpu.stream)


def measure_ceilings(harness: cuda.Module, gpu: Gpu) -> tuple[float, float]:
    """(device copy bytes/s, FP32 FMA flops/s), best of a few trials each: for the
    physics floor of a GPU with no datasheet entry (ceilings.ceilings_from_measurement)."""
    size = min(1 << 30, gpu.free_bytes() // 8) & ~0xFFF
    src, dst = cuda.mem_alloc(size), cuda.mem_alloc(size)
    start, stop = cuda.Event(), cuda.Event()
    copy_best = float("inf")
    for _ in range(5):
        start.record(gpu.stream)
        cuda.memcpy_dtod_async(dst, src, size, gpu.stream)
        stop.record(gpu.stream)
        stop.synchronize()
        copy_best = min(copy_best, start.time_till(stop) * 1e-3)
    src.free()
    dst.free()
    sms = gpu.device.get_attribute(cuda.device_attribute.MULTIPROCESSOR_COUNT)
    blocks, threads, iterations = sms * 8, 256, 1 << 14
    out = cuda.mem_alloc(4)
    fma = harness.get_function("optiml_fma_loop")
    fma_best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        start.record(gpu.stream)
        fma(out, np.int32(iterations), np.float32(1.0), grid=(blocks, 1, 1),
            block=(threads, 1, 1), stream=gpu.stream)
        stop.record(gpu.stream)
        stop.synchronize()
        fma_best = min(fma_best, start.time_till(stop) * 1e-3 or time.perf_counter() - started)
    out.free()
    return 2 * size / copy_best, 16.0 * iterations * blocks * threads / fma_best
