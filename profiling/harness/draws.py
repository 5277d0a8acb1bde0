"""Inputs drawn on the GPU by the harness's own kernels, described as plain data.

A draw is what one of refresh.cu's generators writes into one input: the kernel, the
element count, the input's own seed and the distribution (or integer range). The worker
draws a check's L1 inputs into the candidate's buffers from it (worker.Session.draw); for
a task whose L1 checks are judged in the reference child (spec.Task.l1_in_reference_child)
the child gets the same description as JSON and draws the same inputs on its own GPU with
the same kernel, so no input travels between the processes. That the two draws are the
same is checked, not assumed: each side sums its draws with optiml_keyed_checksum under
one public key (INPUT_CHECKSUM_KEY) and the worker compares the sums.

    draws = check_draws(task, check)           # what the worker launches, in order
    launch(harness_module, draws[0], ptr)      # pycuda: the worker's context or the child's
    host_values(draws[0])                      # the same numbers replayed in numpy (no GPU)
    checksum_text({name: keyed_checksum_host(array, INPUT_CHECKSUM_KEY)})

The numpy replays (host_values, keyed_checksum_host) let a host without a GPU run the
child's side (tests, OPTIML_REFERENCE_DEVICE=cpu); integer draws and checksums replay bit
for bit, float draws to a few units in the last place (inputs.gpu_like_values).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import expr
from .spec import Task, TensorSpec

if TYPE_CHECKING:
    from .inputs import Check

# The distributions the harness's generator draws on the GPU (refresh.cu:
# optiml_generate_f32), by the code that kernel takes.
GPU_DISTRIBUTIONS = {"normal": 0, "heavy_tailed": 1, "uniform": 2}


def generated_on_gpu(task: Task, check: Check) -> bool:
    """Whether a full gate generates this check's inputs on the GPU (why_not_on_gpu)."""
    return why_not_on_gpu(task, check) is None


def why_not_on_gpu(task: Task, check: Check) -> str | None:
    """Why this check's inputs are generated on the host, or None when a full gate draws
    them on the GPU: the L1 checks (the big ones) of a task whose every input the GPU
    draws as the host would (why_not_drawn: float32 from the default generator in a
    distribution the GPU draws, or int32 uniform in the input's refresh range). A task
    with a generator of its own (cross_entropy's labels, say) keeps it, on the host."""
    if check.level != "L1":
        return f"{check.level} inputs are small: generated on the host, where the reference is checked"
    reasons = (why_not_drawn(t, check.distribution, check.sizes) for t in task.inputs)
    return next((why for why in reasons if why is not None), None)


def gpu_like_values(count: int, seed: int, distribution: str, *, start: int = 0) -> np.ndarray:
    """Elements start .. start+count of what optiml_generate_f32 writes for `seed`, with
    the same hashing in numpy: to replay a gate's L1 inputs on a host without a GPU.
    The integers are identical; log, sqrt and cos are the host's (float64, rounded to
    float32 at the end), so values agree to a few units in the last place, not bit for bit."""
    code = GPU_DISTRIBUTIONS[distribution]
    with np.errstate(over="ignore"):
        index = np.arange(start, start + count, dtype=np.uint64)
        h = _splitmix64(np.uint64(seed) ^ _splitmix64(index))
        if code == 2:
            return (2.0 * _unit_open(h) - 1.0).astype(np.float32)
        value = _normal_from(h)
        if code == 1:
            v = np.zeros(count, np.float64)
            for _ in range(3):
                h = _splitmix64(_splitmix64(h))
                v += _normal_from(h) ** 2
            value = 4.0 * value / np.maximum(np.sqrt(v / 3.0), 1e-12)
        return value.astype(np.float32)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _unit_open(bits: np.ndarray) -> np.ndarray:
    """24 random bits -> (0, 1), rounded as the kernel's float32 arithmetic rounds them."""
    return ((bits >> np.uint64(40)).astype(np.float32) + np.float32(0.5)).astype(np.float64) / 16777216.0


def _normal_from(h: np.ndarray) -> np.ndarray:
    u1, u2 = _unit_open(h), _unit_open(_splitmix64(h))
    return np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)


# The key of the checksum the worker and the reference child compare their draws by (and
# an L1 seed's cache entry is kept under: worker.Session.public_checksum). Not a secret:
# the sum only has to tell one draw from another.
INPUT_CHECKSUM_KEY = 0x6F70746D6C2D6731
GENERATE_F32 = "optiml_generate_f32"
REFRESH_NORMAL_F32 = "optiml_refresh_normal_f32"  # the timed runs' float inputs
REFRESH_INT32 = "optiml_refresh_int32"
# refresh.cu's launch shape for its generators: 256 threads, at most 4096 blocks striding.
BLOCK, MAX_BLOCKS = 256, 4096


@dataclass(frozen=True)
class Draw:
    """One input's draw: `kernel` writes `count` elements of `dtype` from `seed`, in
    `distribution` (GENERATE_F32's code), normal (REFRESH_NORMAL_F32) or uniform in
    [low, high) (REFRESH_INT32)."""

    name: str
    kernel: str
    dtype: str
    shape: tuple[int, ...]
    seed: int
    distribution: int = 0
    low: int = 0
    high: int = 0

    @property
    def count(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def to_dict(self) -> dict:
        return {**asdict(self), "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, data: dict) -> Draw:
        return cls(**{**data, "shape": tuple(int(d) for d in data["shape"])})


def integer_bounds(t: TensorSpec, sizes: dict) -> tuple[int, int] | None:
    """[low, high) of an int32 input whose generator draws what the GPU's integer refresh
    draws (uniform in its refresh range: `generate.draws_like_refresh`), else None."""
    if t.dtype != "int32" or not t.refresh.startswith("int:"):
        return None
    if not getattr(t.generate, "draws_like_refresh", False):
        return None
    _, low, high = t.refresh.split(":")
    low_value, high_value = expr.evaluate_int(low, sizes), expr.evaluate_int(high, sizes)
    return low_value, max(high_value, low_value + 1)


def why_not_drawn(t: TensorSpec, distribution: str, sizes: dict) -> str | None:
    """Why the GPU cannot draw this input as the host would, or None when it can."""
    if t.generate is None:
        if t.dtype != "float32":
            return f"input {t.name} is {t.dtype}: the GPU draws float inputs as float32 only"
        if distribution not in GPU_DISTRIBUTIONS:
            return f"the GPU does not draw the {distribution} distribution"
        return None
    if integer_bounds(t, sizes) is None:
        return (f"input {t.name} has a generator of its own (not uniform integers in its refresh "
                "range), which only the host runs")
    return None


def check_draws(task: Task, check: Check) -> list[Draw]:
    """Every input's draw for one check, each its own stream of the check's seed (as the
    timed runs' refresh: timing.input_seed)."""
    from .timing import input_seed

    draws = []
    for position, t in enumerate(task.inputs):
        shape, seed = t.resolve_shape(check.sizes), input_seed(check.seed, position)
        bounds = integer_bounds(t, check.sizes)
        if bounds is not None:
            draws.append(Draw(t.name, REFRESH_INT32, t.dtype, shape, seed, low=bounds[0], high=bounds[1]))
        else:
            draws.append(Draw(t.name, GENERATE_F32, t.dtype, shape, seed,
                              distribution=GPU_DISTRIBUTIONS[check.distribution]))
    return draws


def run_draws(task: Task, sizes: dict, seed: int) -> list[Draw]:
    """Every input's draw for one timed run (its refresh seed: timing.run_seed), by the
    input's `refresh`; a ValueError for a refresh the GPU does not have."""
    from .timing import input_seed

    draws = []
    for position, t in enumerate(task.inputs):
        shape, stream_seed = t.resolve_shape(sizes), input_seed(seed, position)
        if t.refresh == "normal" and t.dtype == "float32":
            draws.append(Draw(t.name, REFRESH_NORMAL_F32, t.dtype, shape, stream_seed))
        elif t.refresh.startswith("int:") and t.dtype == "int32":
            _, low, high = t.refresh.split(":")
            draws.append(Draw(t.name, REFRESH_INT32, t.dtype, shape, stream_seed,
                              low=expr.evaluate_int(low, sizes), high=expr.evaluate_int(high, sizes)))
        else:
            raise ValueError(f"input {t.name}: no GPU refresh for {t.refresh!r}")
    return draws


def launch(harness, draw: Draw, pointer: int, stream=None) -> None:
    """Launch the draw's kernel (a pycuda function of the harness's module) on `pointer`."""
    n = draw.count
    grid, block = (min(MAX_BLOCKS, max(1, -(-n // BLOCK))), 1, 1), (BLOCK, 1, 1)
    function = harness.get_function(draw.kernel)
    if draw.kernel == REFRESH_INT32:
        function(np.uintp(pointer), np.uint64(n), np.uint64(draw.seed), np.int32(draw.low),
                 np.int32(draw.high), grid=grid, block=block, stream=stream)
    elif draw.kernel == REFRESH_NORMAL_F32:
        function(np.uintp(pointer), np.uint64(n), np.uint64(draw.seed), grid=grid, block=block, stream=stream)
    else:
        function(np.uintp(pointer), np.uint64(n), np.uint64(draw.seed), np.int32(draw.distribution),
                 grid=grid, block=block, stream=stream)


def host_values(draw: Draw) -> np.ndarray:
    """What the draw's kernel writes, replayed in numpy (see the module's docstring)."""
    if draw.kernel == REFRESH_INT32:
        with np.errstate(over="ignore"):
            index = np.arange(draw.count, dtype=np.uint64)
            h = _splitmix64(np.uint64(draw.seed) ^ _splitmix64(index))
            span = np.uint64(draw.high - draw.low)
            values = (np.int64(draw.low) + (h % span).astype(np.int64)).astype(np.int32)
        return values.reshape(draw.shape)
    names = {code: name for name, code in GPU_DISTRIBUTIONS.items()}
    distribution = "normal" if draw.kernel == REFRESH_NORMAL_F32 else names[draw.distribution]
    return gpu_like_values(draw.count, draw.seed, distribution).reshape(draw.shape)


def keyed_checksum_host(array: np.ndarray, key: int) -> int:
    """optiml_keyed_checksum of an array's bytes, in numpy: the sum over its 4-byte words
    i of (splitmix64(key ^ splitmix64(i)) | 1) * (word + 1), mod 2^64 (then its tail
    bytes, each with the index offset by 2^62)."""
    raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
    words = raw[: raw.size // 4 * 4].view(np.uint32).astype(np.uint64)
    with np.errstate(over="ignore"):
        total = _keyed_sum(np.arange(words.size, dtype=np.uint64), words, key)
        tail = raw[raw.size // 4 * 4:].astype(np.uint64)
        offset = np.uint64(1 << 62)
        total += _keyed_sum(np.arange(raw.size // 4 * 4, raw.size, dtype=np.uint64) + offset, tail, key)
    return int(total)


def _keyed_sum(index: np.ndarray, values: np.ndarray, key: int) -> np.uint64:
    weights = _splitmix64(np.uint64(key) ^ _splitmix64(index)) | np.uint64(1)
    return np.sum(weights * (values + np.uint64(1)), dtype=np.uint64)


def checksum_text(sums: dict[str, int]) -> str:
    """The sums as the worker writes them (its cache key, and what the child answers)."""
    return " ".join(f"{name}:{value:016x}" for name, value in sums.items())


class ChildDraws:
    """The reference child's side (gpuref.py): draws made into torch tensors on its own
    device, with the harness's kernels (pycuda in torch's primary context, so both see
    the same memory) on a GPU, with the numpy replays on the CPU (a host without one)."""

    def __init__(self, torch, device) -> None:
        self.torch, self.device = torch, device
        self.cuda = None  # pycuda's driver, once a draw needs it
        self.context = None
        self.modules: dict[str, object] = {}

    def make(self, draws: list[Draw], harness_cubin: str) -> tuple[dict, dict[str, int]]:
        """(the drawn tensors by name, each one's optiml_keyed_checksum under
        INPUT_CHECKSUM_KEY, as the worker sums its own draws: Session.public_checksum)."""
        torch = self.torch
        if self.device.type != "cuda":
            values = {d.name: host_values(d) for d in draws}
            return ({name: torch.from_numpy(v).to(self.device) for name, v in values.items()},
                    {name: keyed_checksum_host(v, INPUT_CHECKSUM_KEY) for name, v in values.items()})
        module = self._module(harness_cubin)
        made = {}
        for d in draws:
            made[d.name] = torch.empty(d.shape, dtype=getattr(torch, d.dtype), device=self.device)
            if d.count:
                launch(module, d, made[d.name].data_ptr())
        torch.cuda.synchronize(self.device)  # pycuda's launches are on the legacy default stream
        return made, self._checksums(module, made)

    def _checksums(self, module, tensors: dict) -> dict[str, int]:
        torch, function = self.torch, module.get_function("optiml_keyed_checksum")
        sums = {}
        for name, t in tensors.items():
            result = torch.zeros(1, dtype=torch.int64, device=self.device)
            function(np.uintp(t.data_ptr()), np.uint64(t.numel() * t.element_size()),
                     np.uint64(INPUT_CHECKSUM_KEY), np.uintp(result.data_ptr()),
                     grid=CHECKSUM_GRID, block=(BLOCK, 1, 1))
            torch.cuda.synchronize(self.device)
            sums[name] = int(result.item()) & ((1 << 64) - 1)  # the kernel's unsigned sum
        return sums

    def driver(self):
        """pycuda's driver, its current context torch's own (the device's primary one)."""
        if self.context is None:
            import pycuda.driver as cuda

            cuda.init()
            index = self.device.index if self.device.index is not None else self.torch.cuda.current_device()
            self.cuda, self.context = cuda, cuda.Device(index).retain_primary_context()
            self.context.push()
        return self.cuda

    def _module(self, harness_cubin: str):
        self.driver()
        if harness_cubin not in self.modules:
            self.modules[harness_cubin] = self.cuda.module_from_file(harness_cubin)
        return self.modules[harness_cubin]

    def close(self) -> None:
        """Pop pycuda's hold on the context: it aborts the process at exit otherwise."""
        if self.context is not None:
            self.modules.clear()
            self.context.pop()
            self.context = None


# device.py's grid for the harness's reductions (COMPARE_GRID), not imported: that module
# needs pycuda at import.
CHECKSUM_GRID = (1024, 1, 1)
