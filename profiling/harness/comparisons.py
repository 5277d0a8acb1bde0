"""What a kernel's time is compared with, from the GPU that ran it (issue 33, part 2).

A verdict's "x the vendor library" and the time bound of one execution used to compare
with fixed numbers taken on an H200 (each task's `vendor` and `naive_ms`,
bench/results/2026-11-29-h200-suite.json), on whatever GPU ran the kernel: an H100 read
0.71x torch's relu where torch, timed in the same call on the H100, ran at the same speed.
Here a comparison belongs to the GPU, driver, torch version, task and sizes it was
measured with (ComparisonKey), is measured once per key on the worker's own GPU and kept
in `$OPTIML_CACHE_DIR/comparisons.json` (ComparisonCache), and says where it came from.

The rules:
- A GPU without a vendor measurement of its own shows no vendor ratio, never another
  GPU's (`vendor_ms` None). The recorded numbers count only on the GPU they were
  recorded on (RECORDED_GPU).
- The time bound of one execution scales this GPU's naive time when it was measured;
  otherwise the recorded one, and the bound says so (`naive_for_bound`).

Measuring is a strategy (Measurer), so the rules are tested on the CPU with a fake; the
real one times torch and the naive kernel on the GPU (comparisons_gpu.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Protocol

from .jsonfile import write_json_atomically
from .spec import Task

# Every recorded time in profiling/harness/tasks/ (VendorReference, naive_ms) was taken
# on this GPU: bench/results/2026-11-29-h200-suite.json, GPU.md.
RECORDED_GPU = "NVIDIA H200"
RECORDED_WHERE = "bench/results/2026-11-29-h200-suite.json"

MEASURED = "measured"
RECORDED = "recorded"
NOT_MEASURED = "not measured"


@dataclass(frozen=True)
class ComparisonKey:
    """What a comparison's times depend on: measured with other values, they are others."""

    gpu: str
    driver: str
    torch: str
    task: str
    sizes: tuple[tuple[str, int], ...]

    @classmethod
    def of(cls, *, gpu: str, driver: str, torch: str, task: str, sizes: dict[str, int]) -> ComparisonKey:
        return cls(gpu, driver, torch, task, tuple(sorted((k, int(v)) for k, v in sizes.items())))

    def to_dict(self) -> dict:
        return {"gpu": self.gpu, "driver": self.driver, "torch": self.torch, "task": self.task,
                "sizes": dict(self.sizes)}

    @classmethod
    def from_dict(cls, data: dict) -> ComparisonKey:
        return cls.of(gpu=data["gpu"], driver=data["driver"], torch=data["torch"], task=data["task"],
                      sizes=data["sizes"])

    def text(self) -> str:
        sizes = ",".join(f"{k}={v}" for k, v in self.sizes)
        return f"{self.gpu} | driver {self.driver} | torch {self.torch} | {self.task} | {sizes}"


def torch_version() -> str:
    """The installed torch's version, without importing it (the worker has no use for
    torch itself); "none" where it is not installed: no vendor call can be timed there."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "none"


def key_here(environment: dict, task: str, sizes: dict[str, int]) -> ComparisonKey:
    """The key of this GPU's comparisons, from device.Gpu.environment(): its name, the
    driver's CUDA version (what measure.py keys ceilings by too) and torch's."""
    return ComparisonKey.of(gpu=environment.get("gpu", ""), driver=environment.get("driver_api", ""),
                            torch=torch_version(), task=task, sizes=sizes)


@dataclass(frozen=True)
class Comparison:
    """The vendor's and the naive kernel's times for one task on one GPU, and where they
    came from: `source` is MEASURED (on `gpu`, `measured_on` a date), RECORDED (the
    task's fixed numbers, `where` says which file) or NOT_MEASURED (no times)."""

    gpu: str
    source: str
    vendor_ms: float | None = None
    vendor_what: str = ""
    naive_ms: float | None = None
    measured_on: str = ""
    where: str = ""
    key: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    sizes: dict[str, int] = field(default_factory=dict)  # the sizes the times are at

    def describe(self) -> str:
        if self.source == MEASURED:
            return f"measured on this GPU ({self.gpu}) on {self.measured_on}"
        if self.source == RECORDED:
            return f"recorded on the {self.gpu} ({self.where})"
        return f"not measured on this GPU ({self.gpu or 'unknown'})"

    def to_dict(self) -> dict:
        return {**asdict(self), "notes": list(self.notes), "described": self.describe()}

    @classmethod
    def from_dict(cls, data: dict) -> Comparison:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**{**known, "notes": tuple(known.get("notes", ()))})


def not_measured(gpu: str, why: str = "") -> Comparison:
    return Comparison(gpu=gpu, source=NOT_MEASURED, notes=(why,) if why else ())


def same_gpu(name: str, other: str) -> bool:
    """Whether two names are one GPU model as the driver names it, "NVIDIA " aside:
    "H200" is "NVIDIA H200"; "NVIDIA H100 80GB HBM3" is neither, nor is "NVIDIA H200 NVL"."""
    def bare(text: str) -> str:
        return re.sub(r"^NVIDIA\s+", "", text.strip(), flags=re.IGNORECASE).casefold()

    return bool(bare(name)) and bare(name) == bare(other)


def recorded(task: Task) -> Comparison:
    """The task's fixed numbers, as taken on RECORDED_GPU."""
    return Comparison(gpu=RECORDED_GPU, source=RECORDED,
                      vendor_ms=task.vendor.time_ms if task.vendor else None,
                      vendor_what=task.vendor.what if task.vendor else "",
                      naive_ms=task.naive_ms, where=RECORDED_WHERE, sizes=dict(task.sizes))


def for_gpu(task: Task, gpu: str, measured: Comparison | None = None) -> Comparison:
    """The comparison a verdict on `gpu` shows: this GPU's own measurement; else the
    recorded numbers if they were taken on a GPU of this name; else none."""
    if measured is not None and measured.source == MEASURED and same_gpu(measured.gpu, gpu):
        return measured
    kept = recorded(task)
    if same_gpu(kept.gpu, gpu) and (kept.vendor_ms is not None or kept.naive_ms is not None):
        return kept
    return not_measured(gpu, f"the task's times were recorded on the {RECORDED_GPU}, not measured here")


def for_gpu_from(task: Task, gpu: str, kept: Iterable[dict]) -> Comparison:
    """for_gpu with the comparisons kept in verdicts (Verdict.comparison): the first one
    measured on `gpu` with a vendor time, else the recorded numbers on their own GPU only."""
    for data in kept:
        if data and data.get("source") == MEASURED:
            found = Comparison.from_dict(data)
            if found.vendor_ms and same_gpu(found.gpu, gpu):
                return found
    return for_gpu(task, gpu)


class Measurer(Protocol):
    """Times a task's comparisons on the GPU it runs on, the gate's way (fresh inputs every
    run, the L2 flushed before each, CUDA events, the median of many runs). Each returns
    None when it cannot measure (no torch, no vendor call for the task, the naive kernel
    did not pass); it raises only for a fault of its own."""

    def vendor(self, task: Task, sizes: dict[str, int]) -> tuple[float, str] | None:
        """The vendor library's median in ms, and what was timed."""

    def naive(self, task: Task, sizes: dict[str, int]) -> float | None:
        """The task's naive kernel's median in ms."""


class ComparisonCache:
    """Comparisons by key (ComparisonKey.text()) in one JSON file, written atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def default(cls) -> ComparisonCache:
        from .compile import default_cache_dir

        return cls(default_cache_dir().parent / "comparisons.json")

    def get(self, key: ComparisonKey) -> Comparison | None:
        entry = self._read().get(key.text())
        return Comparison.from_dict(entry) if isinstance(entry, dict) else None

    def put(self, key: ComparisonKey, comparison: Comparison) -> None:
        known = self._read()
        known[key.text()] = comparison.to_dict()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_json_atomically(self.path, known)

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


def comparison_for(task: Task, key: ComparisonKey, *, cache: ComparisonCache,
                   measurer: Measurer | None, today: date | None = None) -> Comparison:
    """The worker's comparison for `key`: the cached one; else measured now by `measurer`
    and cached; else (no measurer: no torch or no GPU here) not measured, and not cached,
    so a later worker that can measure does."""
    hit = cache.get(key)
    if hit is not None:
        return hit
    if measurer is None:
        return not_measured(key.gpu, "no torch or no GPU on this worker to measure with")
    sizes = dict(key.sizes)
    vendor = measurer.vendor(task, sizes)
    naive = measurer.naive(task, sizes) if task.naive_source else None
    notes = tuple(note for note, missing in (("no vendor call for this task could be timed", vendor is None),
                                             ("the naive kernel was not timed", naive is None)) if missing)
    made = Comparison(gpu=key.gpu, source=MEASURED, vendor_ms=vendor[0] if vendor else None,
                      vendor_what=vendor[1] if vendor else "", naive_ms=naive,
                      measured_on=(today or date.today()).isoformat(), key=key.text(), notes=notes,
                      sizes=sizes)
    cache.put(key, made)
    return made


@dataclass(frozen=True)
class NaiveScale:
    """The naive kernel's time the bound of one execution scales (worker.launch_bound_s),
    the sizes it was taken at, and where it is from, in words."""

    ms: float
    sizes: dict[str, int]
    why: str


def naive_for_bound(task: Task, comparison: Comparison | None) -> NaiveScale | None:
    """This GPU's naive time when it was measured here; else the task's recorded one (the
    rule before this module), which says it is not this GPU's; None without either."""
    if comparison is not None and comparison.source == MEASURED and comparison.naive_ms and comparison.sizes:
        return NaiveScale(comparison.naive_ms, dict(comparison.sizes),
                          f"{comparison.naive_ms:.4g} ms, {comparison.describe()}")
    if task.naive_ms:
        return NaiveScale(task.naive_ms, dict(task.sizes),
                          f"{task.naive_ms} ms recorded on the {RECORDED_GPU}, not measured on this GPU "
                          f"({RECORDED_WHERE})")
    return None
