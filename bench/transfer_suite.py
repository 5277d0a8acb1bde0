"""The transfer suite (issue 31): twelve operators the product never saw, from their
newcomer's naive kernels, searched with skills + rewrites + tunables (no LLM), and again
with skills off, the vendor (torch) timed in the same run, on a GPU host.

    python bench/transfer_suite.py --out bench/results/$(date +%F)-<gpu>-transfer-suite.json \\
        --record-dir $OUT/transfer [--tasks gemv,where] [--budget 100] [--time-limit 3] \\
        [--skills on,off]
    python bench/transfer_suite.py --leave-own-out --tasks suite ...   # the suite's own tasks

With `--leave-own-out` (OPTIML_SKILLS_LEAVE_OUT_OWN=1) a task's own lineage is not counted:
a card serves it only when another task's lineage induced it too, and the cards it cites
are the other tasks'. `--tasks suite` names the suite's ten tasks (SUITE).

The tasks live in bench/transfer_tasks/ (put on OPTIML_TASK_PATH here), apart from the
suite. The skills are the skeleton cards induced from the recorded lineages of the
suite's tasks (OPTIML_SKILL_CARDS=skeletons: no token-level induction in the search
process), none of which is one of these tasks: every card a path holds was induced from
another task. Per task and mode: naive, best and vendor times, best against the vendor,
evaluations, the best path, and the skeleton cards on it with the tasks they came from.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import math
import os
import shlex
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.skills_roundtrip import MAX_DEPTH, best_path  # noqa: E402
from profiling.harness import tasks  # noqa: E402
from profiling.harness.jsonfile import write_json_atomically  # noqa: E402

TASK_DIR = Path(__file__).resolve().parent / "transfer_tasks"
# Tasks that only admit cards (bench/admission_tasks/README.md): not in the suite.
ADMISSION_DIR = Path(__file__).resolve().parent / "admission_tasks"
TASKS = ("silu_mul", "rotary", "add_rmsnorm", "groupnorm", "var_mean", "mse_loss", "gemv",
         "addmm_gelu", "conv1x1", "depthwise3x3", "upsample2x", "where")
SUITE = ("relu", "reduce_sum", "softmax", "layernorm", "cross_entropy", "maxpool3d", "sgemm",
         "self_attention", "conv2d", "topk")
WITH_SKILLS = ("search.engine.sources.TunableSource,search.engine.rewrites.RewriteSource,"
               "lineage.engine.skills.SkillSource")
WITHOUT_SKILLS = "search.engine.sources.TunableSource,search.engine.rewrites.RewriteSource"
# Tokens of cards that are not structural: a qualifier, an intrinsic, a knob.
NOT_STRUCTURAL = ("RESTRICT", "FAST_MATH", "tunable")
L2_FLUSH_BYTES = 256 * 1024 * 1024


def time_vendor(name: str, sizes: dict, runs: int = 30, warmup: int = 3,
                extra: tuple[Path, ...] = ()) -> list[float] | None:
    """torch's call, timed as bench/vendor.py times the suite's; None for a task of a
    --task-dir whose vendor.py has no call for it."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ops = vendor_ops(extra)
    if name not in ops:
        return None
    make, call = ops[name]
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    samples = []
    for i in range(warmup + runs):
        args = make(sizes, "cuda")
        flush.fill_(float(i))
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call(*args)
        stop.record()
        stop.synchronize()
        if i >= warmup:
            samples.append(start.elapsed_time(stop))
    return samples


def vendor_ops(extra: tuple[Path, ...] = ()) -> dict:
    """The torch calls of the transfer and admission tasks (each directory's vendor.py,
    and that of each directory given with --task-dir), and of the suite's tasks
    (bench/vendor.py: a skeleton tried on a suite task, its own lineage left out)."""
    from bench import vendor

    ops = {name: (lambda s, d, n=name: vendor._inputs(n, s, d), call) for name, call in vendor.OPS.items()}
    for directory in (TASK_DIR, ADMISSION_DIR, *extra):
        if not (directory / "vendor.py").exists():
            continue
        name = f"optiml_vendor_{directory.name}"
        spec = importlib.util.spec_from_file_location(name, directory / "vendor.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        ops.update(module.OPS)
    return ops


def cards_on(path: list[str]) -> list[str]:
    return [step.split(": ", 1)[0] for step in path if step.startswith("skill:skeleton:")]


def structural(path: list[str]) -> bool:
    return any(step.startswith("skill:") and not any(t in step for t in NOT_STRUCTURAL) for step in path)


def run_task(name: str, mode: str, args: argparse.Namespace) -> dict:
    from search.engine.__main__ import build_parser, optimize

    task = tasks.get(name)
    record_dir, work = Path(args.record_dir), Path(args.workdir) / f"{name}-{mode}"
    work.mkdir(parents=True, exist_ok=True)
    source, plan = work / "naive.cu", work / "plan.json"
    source.write_text(task.naive_source)
    plan.write_text(json.dumps(task.naive_plan))
    trajectory_path = record_dir / f"trajectory-{name}-{mode}.json"
    argv = ["optimize", "--task", name, "--from", str(source), "--plan", str(plan),
            "--budget", str(args.budget), "--judge", "rules",
            "--sources", WITH_SKILLS if mode == "skills" else WITHOUT_SKILLS,
            "--max-depth", str(MAX_DEPTH), "--workdir", str(work / "gate"), "--json", str(trajectory_path),
            "--no-comparisons"]  # torch is timed here, in the same run; the naive kernel by the search
    if args.time_limit:
        argv += ["--time-limit", str(args.time_limit)]
    if args.no_profile:
        argv.append("--no-profile")
    try:
        optimize(build_parser().parse_args(argv), out=lambda line: print(line, flush=True))
    finally:  # the gate's input caches are gigabytes: the next task needs the disk
        shutil.rmtree(work, ignore_errors=True)
    trajectory = json.loads(trajectory_path.read_text())
    summary, path = trajectory["summary"], best_path(trajectory["rows"])
    samples = time_vendor(name, task.sizes, extra=tuple(Path(d) for d in args.task_dir))
    vendor_ms = statistics.median(samples) if samples else None
    best_ms = summary["best_time_ms"]
    return {"task": name, "mode": mode, "argv": ["python", "-m", "search.engine", *argv],
            "naive_ms": summary["root_time_ms"], "best_ms": best_ms, "vendor_ms": vendor_ms,
            "vs_vendor": vendor_ms / best_ms if best_ms and vendor_ms else None,
            "vs_naive": summary["root_time_ms"] / best_ms if best_ms and summary["root_time_ms"] else None,
            "evaluations": summary["evaluations"], "path": path,
            # the cost target: candidates a GPU-minute with skills >= 0.9x without
            "evaluation_seconds": summary.get("evaluation_seconds"), "wall_s": summary.get("wall_s"),
            "candidates_per_gpu_minute": summary.get("candidates_per_gpu_minute"),
            "skeleton_cards_on_path": cards_on(path), "structural_card_on_path": structural(path)}


def _geomean(values: list[float]) -> float | None:
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def summary(rows: list[dict]) -> dict:
    speeds = [r["vs_vendor"] for r in rows if r.get("vs_vendor")]
    return {"tasks": len(rows), "measured": len(speeds),
            "geomean_vs_vendor": math.exp(sum(map(math.log, speeds)) / len(speeds)) if speeds else None,
            "at_0.8_of_vendor": sum(1 for s in speeds if s >= 0.8),
            "geomean_vs_naive": _geomean([r["vs_naive"] for r in rows if r.get("vs_naive")]),
            "structural_card_on_best_path": sum(1 for r in rows if r.get("structural_card_on_path")),
            "evaluations": sum(r.get("evaluations") or 0 for r in rows)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--skills", default="skills,none", help="modes, in order: skills, none")
    parser.add_argument("--budget", type=int, default=100)
    parser.add_argument("--time-limit", type=float, help="minutes per task's search")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--task-dir", action="append", default=[],
                        help="another directory of task modules (and its vendor.py), as OPTIML_TASK_PATH")
    parser.add_argument("--leave-own-out", action="store_true",
                        help="a task's own lineage is not counted (cards induced from other tasks only)")
    parser.add_argument("--workdir", default=tempfile.mkdtemp(prefix="optiml-transfer-suite-"))
    parser.add_argument("--record-dir", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.tasks == "suite":
        args.tasks = ",".join(SUITE)
    if args.leave_own_out:
        os.environ["OPTIML_SKILLS_LEAVE_OUT_OWN"] = "1"
    tasks.add_directory(TASK_DIR)
    tasks.add_directory(ADMISSION_DIR)  # tasks of layouts no transfer task has (column_stats)
    for directory in args.task_dir:
        tasks.add_directory(directory)
    os.environ["OPTIML_SKILL_CARDS"] = "skeletons"  # skeleton cards alone, no token induction
    Path(args.record_dir).mkdir(parents=True, exist_ok=True)
    from bench.suite import gpu_facts

    result = {"what": f"transfer suite from the naive kernels, no LLM, budget {args.budget}, "
                      f"time limit {args.time_limit} min per search"
                      + (", each task's own lineage left out" if args.leave_own_out else ""),
              "command": shlex.join(["python", *sys.argv]),
              "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
              "environment": gpu_facts() if shutil.which("nvidia-smi") else {"gpu": None}, "runs": {}}
    for mode in args.skills.split(","):
        rows = result["runs"].setdefault(mode, {"tasks": {}})
        for name in args.tasks.split(","):
            try:
                rows["tasks"][name] = run_task(name, mode, args)
            except Exception as error:  # one task failing must not lose the others
                rows["tasks"][name] = {"task": name, "error": f"{type(error).__name__}: {error}"}
            rows["summary"] = summary(list(rows["tasks"].values()))
            write_json_atomically(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
