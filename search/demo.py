"""Demo recordings: a search recorded on a GPU host, shipped with the app, replayed per run.

A demo run (search.demo_runs) is served by the recorded evaluator from the recording of
its task, so a person without a GPU sees a real search with real times, labelled as
recorded. The recordings live in DEMO_DIR, one file per GPU and task:

    search/demo_recordings/<gpu>/<task>.json      e.g. h200/relu.json

Each is what `python -m search.engine optimize --record` writes (evaluators.py,
RecordingEvaluator), plus a "demo" object saying how the search was run, so that the app
replays the very same search (bench/record_demo.py writes it):

    {"gpu": "NVIDIA H200", "task": "relu", "note": "...",
     "demo": {"recorded_at": "2026-11-29", "seed": 0, "budget": 5, "judge": "rules",
              "sources": ["search.engine.sources.TunableSource", ...]},
     "recorded": {"<candidate hash>": {...Measurement.to_dict()...}}}

The search is deterministic given its seed, sources and measurements (search.py: the RNG
is seeded, proposals are ordered), so a replay with that seed, those sources and the
recorded budget asks for exactly the recorded kernels: when it does not, the search's
proposals changed and the recording must be made again (tests/web/test_demo_replay.py).
No Django here: the GPU host's generator reads and writes these too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DEMO_DIR = Path(__file__).resolve().parent / "demo_recordings"
# Which GPU's recording a demo run replays when a task has several: the first here that
# has one (the H200 is the GPU most of the project's numbers were measured on).
GPU_PREFERENCE = ("h200", "h100")


class DemoRecordingError(ValueError):
    """A demo that cannot be had: the message says why, `field` which input of a new run
    it is about."""

    def __init__(self, message: str, *, field: str = "evaluator") -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class DemoRecording:
    task: str
    gpu: str  # the GPU's name as the recording says it ("NVIDIA H200")
    folder: str  # the GPU's folder ("h200")
    path: Path
    recorded_at: str  # a date, as the recording says it
    seed: int
    budget: int
    judge: str
    sources: tuple[str, ...]  # proposal sources by dotted path, as the engine's --sources
    note: str

    @property
    def key(self) -> str:
        """What a run stores to name its recording ("h200/relu.json"): a path inside DEMO_DIR."""
        return f"{self.folder}/{self.path.name}"

    def banner(self) -> str:
        """What a demo run's pages say above everything else."""
        return (f"Demo: the times are recorded, measured on the {self.gpu} on {self.recorded_at} and "
                "replayed here; nothing runs on a GPU now.")


def gpu_folder(gpu: str) -> str:
    """The folder a GPU's recordings go in: "NVIDIA H200" -> "h200"."""
    words = gpu.lower().replace("nvidia", "").split()
    return "-".join(words) or "unknown"


def read_demo(path: Path) -> DemoRecording:
    """A recording file as a DemoRecording; DemoRecordingError names what is missing."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise DemoRecordingError(f"demo recording {path.name}: {error}") from None
    demo = data.get("demo") if isinstance(data, dict) else None
    if not isinstance(demo, dict) or not isinstance(data.get("recorded"), dict):
        raise DemoRecordingError(f"demo recording {path.name} needs a 'demo' object and the engine's "
                                 "'recorded' object (bench/record_demo.py writes both)")
    try:
        return DemoRecording(
            task=str(data["task"]), gpu=str(data["gpu"]), folder=path.parent.name, path=path,
            recorded_at=str(demo["recorded_at"]), seed=int(demo["seed"]), budget=int(demo["budget"]),
            judge=str(demo.get("judge", "rules")), sources=tuple(str(s) for s in demo["sources"]),
            note=str(data.get("note", "")))
    except (KeyError, TypeError, ValueError) as error:
        raise DemoRecordingError(f"demo recording {path.name}: missing or bad {error}") from None


def demo_recordings(root: Path | None = None) -> list[DemoRecording]:
    """Every demo recording under `root` (DEMO_DIR), by task then GPU preference."""
    found = [read_demo(path) for path in sorted((root or DEMO_DIR).glob("*/*.json"))]
    return sorted(found, key=lambda r: (r.task, _preference(r.folder)))


def demo_for(task: str, root: Path | None = None) -> DemoRecording | None:
    """The recording a demo run of `task` replays (GPU_PREFERENCE), or None."""
    for recording in demo_recordings(root):
        if recording.task == task:
            return recording
    return None


def demo_by_key(key: str, root: Path | None = None) -> DemoRecording:
    """The recording a run names ("h200/relu.json"); only a file inside `root` (DEMO_DIR)."""
    root = root or DEMO_DIR
    folder, _, name = key.partition("/")
    path = root / folder / name
    inside = path.resolve().parent.parent == root.resolve()
    if not folder or "/" in name or not name.endswith(".json") or not inside:
        raise DemoRecordingError(f"{key!r} names no demo recording")
    return read_demo(path)


def demo_metadata(*, recorded_at: str, seed: int, budget: int, judge: str,
                  sources: list[str]) -> dict[str, Any]:
    """The "demo" object a generator adds to a recording (bench/record_demo.py)."""
    return {"recorded_at": recorded_at, "seed": seed, "budget": budget, "judge": judge,
            "sources": list(sources)}


def _preference(folder: str) -> int:
    return GPU_PREFERENCE.index(folder) if folder in GPU_PREFERENCE else len(GPU_PREFERENCE)
