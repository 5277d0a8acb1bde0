"""Command line for GPU hosts without Django: run a search, say why the best is faster.

    python -m search.engine optimize --task relu --budget 30 --json relu-run.json
    python -m search.engine optimize --task relu --budget 30 --record relu-rec.json   # on the GPU
    python -m search.engine optimize --task relu --budget 30 --replay relu-rec.json   # anywhere

Progress lines are printed as nodes finish; then the "why it is faster" account (root ->
best, step by step) and a summary (best time against the starting kernel and the
vendor library, evaluations, wall time, when the best was found). --json writes the
trajectory: the summary, the account, the tree's rows and the full resumable state.

As on the web path, each asked kernel is compiled here first (nvcc; no GPU needed): one
that compiles to the same binary as a node with a smaller id (search/engine/binaries.py)
is not evaluated but done from that node's measurement, and not refined. --no-dedupe
evaluates every kernel, as searches recorded before dedupe did.

Two seeds, for two things: --seed steers the search's own choices (the same seed and the
same measurements give the same tree, as --replay shows), and --gate-seed is the gate's
base seed for the correctness inputs, one for the whole search so that its inputs are
built once. Without --gate-seed it is drawn at random, printed and written to --json;
give it again to check a search's kernels on the same inputs.
"""

from __future__ import annotations

import argparse
import importlib
import json
import secrets
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from profiling.harness import comparisons, gate, tasks
from profiling.harness.candidate import Candidate
from profiling.harness.gate import GateOptions
from profiling.harness.jsonfile import write_json_atomically
from profiling.harness.screen import ScreenOptions
from profiling.harness.seeds import SEED_BITS
from profiling.harness.spec import Task

from .binaries import compiled_binary, gate_sizes
from .evaluators import GateEvaluator, RecordingEvaluator, ReplayEvaluator, ScreeningEvaluator
from .explain import render_why, why_faster
from .search import Search, SearchConfig, run_search
from .sources import fast_math_allowed
from .types import Evaluator, Judge, JudgeError, Proposal, ProposalSource

Printer = Callable[[str], None]


DEFAULT_SOURCES = ("search.engine.sources.TunableSource", "search.engine.rewrites.RewriteSource",
                   "lineage.engine.skills.SkillSource")
# Short names for --sources. `skills` names the lineage app's source by its dotted path:
# it is imported only when asked for (configuration), never by the engine itself.
SOURCE_NAMES = {
    "tunables": "search.engine.sources.TunableSource",
    "rewrites": "search.engine.rewrites.RewriteSource",
    "skills": "lineage.engine.skills.SkillSource",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m search.engine", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("optimize", help="search for a faster kernel for a task")
    run.add_argument("--task", required=True, help="a task name (profiling.harness.tasks)")
    run.add_argument("--from", dest="source", type=Path, help="start from this .cu file")
    run.add_argument("--plan", type=Path, help="its launch plan (JSON); the task's naive plan if omitted")
    run.add_argument("--budget", type=int, default=30, help="evaluations, the starting kernel's included")
    run.add_argument("--sources", default="tunables,rewrites,skills", metavar="NAME,...",
                     help="proposal sources besides the judge: tunables, rewrites, skills (the "
                          "skill cards), or any class by dotted path (default: tunables,rewrites,"
                          "skills; the first use on a machine induces the cards, about 30 s)")
    run.add_argument("--judge", choices=("rules", "llm"), default="rules")
    run.add_argument("--intent", default="",
                     help="what the kernel should do, in words: without --from, the LLM (when "
                          "configured) writes the starting kernel from it; else the naive one")
    run.add_argument("--seed", type=int, default=0,
                     help="the search's own seed (which child it tries next), not the gate's")
    run.add_argument("--gate-seed", type=gate_seed_arg, metavar="N",
                     help="the gate's base seed for its correctness inputs, one for the whole "
                          f"search (0 to 2**{SEED_BITS} - 1; default: a random one, printed)")
    run.add_argument("--parallel", type=int, default=1, help="asks outstanding at once")
    run.add_argument("--max-depth", type=int, default=SearchConfig.max_depth,
                     help="steps from the root a node may be refined at (an expert with nine "
                          "optimizations is nine steps deep)")
    run.add_argument("--time-limit", type=float, metavar="MINUTES",
                     help="ask for no new candidate after this many minutes")
    run.add_argument("--json", type=Path, help="write the trajectory (tree + summary) here")
    run.add_argument("--record", type=Path, help="record every measurement here, for --replay")
    run.add_argument("--replay", type=Path, help="serve recorded measurements instead of the gate")
    run.add_argument("--seeds", type=int, default=GateOptions.seeds, help="correctness seeds")
    run.add_argument("--runs", type=int, default=GateOptions.timing_runs, help="timed runs")
    run.add_argument("--no-profile", action="store_true", help="skip Nsight Compute")
    run.add_argument("--no-comparisons", action="store_true",
                     help="do not time the vendor and the naive kernel on this GPU (for a benchmark that "
                          "times them itself: the first search does not pay for them in its time limit)")
    run.add_argument("--spot-checks", type=int, default=GateOptions.spot_checks,
                     help="timed runs (of the 30) whose outputs are verified")
    run.add_argument("--workdir", help="keep logs and .ncu-rep reports here")
    run.add_argument("--no-screen", action="store_true",
                     help="give every candidate the full gate (default: screen them in one "
                          "long-lived process, full gate for those faster than the best)")
    run.add_argument("--screen-runs", type=int, default=ScreenOptions.timing_runs,
                     help="timed runs of the screen")
    run.add_argument("--no-dedupe", action="store_true",
                     help="evaluate and refine every kernel, even one that compiles to the same "
                          "binary as an earlier node (default: each asked kernel is compiled "
                          "here first, and such a one is done from that node's measurement)")
    return parser


def gate_seed_arg(text: str) -> int:
    value = int(text)
    if not 0 <= value < 2**SEED_BITS:
        raise argparse.ArgumentTypeError(f"{text} is not a seed from 0 to 2**{SEED_BITS} - 1")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return optimize(args)


def optimize(args: argparse.Namespace, *, judge: Judge | None = None,
             fallback_judge: Judge | None = None, sources: Sequence[ProposalSource] | None = None,
             evaluator: Evaluator | None = None, out: Printer = print) -> int:
    """Run one search as the arguments say; judge, sources and evaluator may be given
    (tests do), otherwise they are built from the arguments."""
    task = tasks.get(args.task)
    gate_seed = None  # the gate's, when this process runs it (not a replay, not given one)
    if evaluator is None:
        evaluator, gate_seed = _make_evaluator(args, out)
        if evaluator is None:
            return 2
    if judge is None:
        judge, fallback_judge = _make_judges(args.judge, out)
    if sources is None:
        named = getattr(args, "sources", ",".join(DEFAULT_SOURCES))
        sources = _make_sources([p.strip() for p in named.split(",") if p.strip()])
    _prepare(sources, out)
    written = _written_root(args, task, judge, out)
    root = written.candidate if written is not None else _root_candidate(args, task)
    sizes = None if args.no_dedupe else gate_sizes(task)  # a binary is refined once
    search = Search(task.name, root, judge=judge, sources=sources,
                    fallback_judge=fallback_judge, root_title=_root_title(args),
                    root_proposal=written,
                    config=SearchConfig(budget=args.budget, seed=args.seed, max_depth=args.max_depth),
                    tolerance_allows_fast_math=fast_math_allowed(task), binary_sizes=sizes)
    started = time.monotonic()
    try:
        run_search(search, evaluator, budget=args.budget, parallel=args.parallel,
                   binary_of=None if sizes is None else partial(compiled_binary, sizes=sizes),
                   on_event=_progress(search, args.budget, out),
                   time_limit_s=args.time_limit * 60 if args.time_limit else None)
    finally:
        close = getattr(evaluator, "close", None)
        if close is not None:
            close()
    wall_s = time.monotonic() - started
    timed_out = bool(args.time_limit) and wall_s >= args.time_limit * 60
    summary = run_summary(search, task, wall_s=wall_s, budget=args.budget, timed_out=timed_out)
    _report(search, summary, args.json, out, gate_seed=gate_seed)
    return 0


def _report(search: Search, summary: dict[str, Any], json_path: Path | None, out: Printer,
            *, gate_seed: int | None = None) -> None:
    out("")
    out(render_why(search.tree))
    out("")
    out(render_summary(summary))
    if gate_seed is not None:
        out(f"  gate seed: {gate_seed} (--gate-seed {gate_seed} checks on the same inputs again)")
    if json_path:
        write_json_atomically(json_path, {"summary": summary, "gate_seed": gate_seed,
                                          "why": why_faster(search.tree),
                                          "rows": search.tree.rows(), "search": search.to_dict()},
                              indent=1)
        out(f"trajectory written to {json_path}")


def _gate_seed(args: argparse.Namespace) -> int:
    """--gate-seed, or a fresh one from the OS: the inputs are then nobody's to know
    beforehand, and the seed is still printed and recorded to reproduce them."""
    return args.gate_seed if args.gate_seed is not None else secrets.randbits(SEED_BITS)


def gate_options(args: argparse.Namespace, gate_seed: int, workdir: Path) -> GateOptions:
    """The gate's options for a search on this host. One fixed gate seed for the whole
    search, with its inputs kept on disk between candidates: the host builds each 1 GB
    input and its reference once, not once per candidate. Never --seed, which is the
    search's."""
    return GateOptions(seeds=args.seeds, timing_runs=args.runs, profile=not args.no_profile,
                       workdir=str(workdir), seed=gate_seed, input_cache=str(workdir / "inputs"),
                       spot_checks=args.spot_checks,
                       measure_comparisons=not getattr(args, "no_comparisons", False))


def _make_evaluator(args: argparse.Namespace, out: Printer) -> tuple[Evaluator | None, int | None]:
    """The evaluator the arguments ask for, and the gate's seed when the gate runs here."""
    gate_seed = None
    if args.replay:
        evaluator: Evaluator = ReplayEvaluator(args.replay)
        out(f"replaying measurements recorded on {evaluator.gpu} from {args.replay}")
    else:
        if gate.gpu_name() is None:
            out("this host has no GPU (or no pycuda): the gate can compile but not run "
                "kernels; use --replay recordings.json, or run on a GPU host")
            return None, None
        gate_seed = _gate_seed(args)
        workdir = Path(args.workdir or tempfile.mkdtemp(prefix="optiml-search-"))
        options = gate_options(args, gate_seed, workdir)
        out(f"gate seed {gate_seed}: the correctness inputs of every candidate (--gate-seed "
            f"{gate_seed} checks on them again)")
        if args.no_screen:
            evaluator = GateEvaluator(options)
        else:
            evaluator = ScreeningEvaluator(options, ScreenOptions(
                timing_runs=args.screen_runs, seed=gate_seed, input_cache=options.input_cache,
                workdir=str(workdir / "screen"), gpu_inputs=options.gpu_inputs))
    return (RecordingEvaluator(evaluator, args.record) if args.record else evaluator), gate_seed


def _make_judges(choice: str, out: Printer) -> tuple[Judge, Judge]:
    from .judges import RuleJudge  # the LLM judge (and openai) only when asked for

    rules = RuleJudge()
    if choice == "rules":
        return rules, rules
    from .judges import LLMJudge

    try:
        return LLMJudge.from_env(), rules
    except Exception as error:  # no endpoint, no key, a bad setting: say so, then go on
        out(f"the LLM judge is unavailable ({type(error).__name__}: {error}); using the rule judge")
        return rules, rules


def _prepare(sources: Sequence[ProposalSource], out: Printer) -> None:
    """Sources that load something first (the skill cards) do it before the search's
    clock starts, and say what they loaded and how long it took."""
    for source in sources:
        prepare = getattr(source, "prepare", None)
        if prepare is not None:
            started = time.monotonic()
            loaded = prepare()
            out(f"{getattr(source, 'name', type(source).__name__)}: {loaded}, "
                f"ready in {time.monotonic() - started:.1f} s")


def _make_sources(paths: Sequence[str] = DEFAULT_SOURCES) -> list[ProposalSource]:
    """The sources named by dotted path (configuration: the search imports no source it
    is not told about, the lineage app's skills included)."""
    found = []
    for given in paths:
        path = SOURCE_NAMES.get(given.strip(), given.strip())
        if "." not in path:
            raise SystemExit(f"error: proposal source {given!r}: not one of {', '.join(SOURCE_NAMES)} "
                             "and not a dotted path")
        module_name, _, class_name = path.rpartition(".")
        try:
            found.append(getattr(importlib.import_module(module_name), class_name)())
        except (ImportError, AttributeError, ValueError) as error:
            raise SystemExit(f"error: proposal source {path!r}: {error}") from None
    return found


def _written_root(args: argparse.Namespace, task: Task, judge: Judge, out: Printer) -> Proposal | None:
    """With an intent and no kernel: the starting kernel written by the LLM judge, or None
    (the naive kernel) when there is no LLM or it could not write one, which is said."""
    if args.source is not None or not args.intent.strip():
        return None
    write = getattr(judge, "write_kernel", None)
    if write is None:
        out("an intent without a kernel needs an LLM to write one (--judge llm and an "
            "endpoint); starting from the task's naive kernel")
        return None
    try:
        proposal = write(task, args.intent)
    except JudgeError as error:
        out(f"{judge.name} could not write a kernel from the intent ({error}); starting from "
            "the task's naive kernel")
        return None
    out(f"starting kernel written by {proposal.source} from the intent: {proposal.title}")
    return proposal


def _root_candidate(args: argparse.Namespace, task: Task) -> Candidate:
    if args.source is None:
        if args.plan is not None:
            raise SystemExit("--plan needs --from (the kernel source it describes)")
        return Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
    plan = json.loads(args.plan.read_text()) if args.plan else task.naive_plan
    return Candidate.from_source_and_plan(args.source.read_text(), plan)


def _root_title(args: argparse.Namespace) -> str:
    return f"starting kernel {args.source.name}" if args.source else "naive kernel (the task's)"


def _progress(search: Search, budget: int, out: Printer) -> Callable[[str, dict[str, Any]], None]:
    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "best_improved":
            speedup = data["speedup_vs_root"]
            out(f"        new best: node {data['id']}"
                + (f", {speedup:.2f}x the starting kernel" if speedup else ""))
        if kind != "node_evaluated":
            return
        node = search.tree[data["id"]]
        m = node.measurement
        assert m is not None
        where = f"node {node.id}" + (f" <- {node.parent}" if node.parent is not None else "")
        if m.passed:
            result = f"{m.time_ms:.4f} ± {m.spread_ms or 0:.4f} ms"
            if m.screen:
                result += f" (full gate; screen said {m.screen['time_ms']:.4f} ms)"
        else:
            result = f"{m.status}{f' ({m.guard})' if m.guard else ''}: {m.message[:80]}"
        result += " [screen]" if m.level == "screen" else ""
        index = f"{node.evaluation:>3}/{budget}" if node.evaluation else " reused"
        twin = f"  (same binary as node {node.duplicate_of})" if node.duplicate_of is not None else ""
        out(f"[{index}] {where} {node.proposal.source}: {node.proposal.title} -> {result}"
            f"  reward {node.reward:+.3f}{'  (replayed)' if m.replayed else ''}{twin}")
    return on_event


def run_summary(search: Search, task: Task, *, wall_s: float, budget: int,
                timed_out: bool = False) -> dict[str, Any]:
    summary = search.summary()
    best_time = summary["best_time_ms"]
    vendor = _vendor_for_best(search, task)
    gpus = sorted({n.measurement.gpu for n in search.tree.nodes.values()
                   if n.measurement is not None and n.measurement.gpu})
    measured = [n.measurement for n in search.tree.nodes.values()
                if n.measurement is not None and not n.reused and not n.measurement.replayed]
    gpu_seconds = sum(m.seconds for m in measured)
    return {**summary, "gpu": ", ".join(gpus), "wall_s": wall_s, "budget": budget,
            # Time the GPU host spent on evaluations (compiles mostly ran ahead of it).
            "evaluation_seconds": gpu_seconds,
            "screened_only": sum(m.level == "screen" for m in measured),
            "full_gate": sum(m.level == "full" for m in measured),
            "candidates_per_gpu_minute": len(measured) / (gpu_seconds / 60) if gpu_seconds else None,
            "stopped_by_time_limit": timed_out and summary["evaluations"] < budget,
            "exhausted": not timed_out and summary["evaluations"] < budget,  # nothing left to try
            "vendor_time_ms": vendor.vendor_ms,
            "vendor": vendor.vendor_what or None,
            "vendor_source": vendor.describe() if vendor.vendor_ms else None,
            "speedup_vs_vendor": vendor.vendor_ms / best_time if vendor.vendor_ms and best_time else None}


def _vendor_for_best(search: Search, task: Task) -> comparisons.Comparison:
    """The vendor's time on the GPU that measured the best node, from the comparisons the
    run's verdicts kept (comparisons.for_gpu_from): never another GPU's (issue 33)."""
    best = search.tree.best
    gpu = best.measurement.gpu if best is not None and best.measurement is not None else ""
    kept = [n.measurement.verdict.get("comparison") or {} for n in search.tree.nodes.values()
            if n.measurement is not None]
    return comparisons.for_gpu_from(task, gpu, kept)


def render_summary(summary: dict[str, Any]) -> str:
    replayed = ", replayed" if summary["replayed"] else ""
    lines = [f"Summary ({summary['task']} on {summary['gpu'] or 'no GPU'}{replayed}):"]
    if summary["best_time_ms"] is None:
        lines.append("  no candidate passed the gate")
    else:
        lines.append(f"  best: node {summary['best_id']}, {summary['best_time_ms']:.4f} ± "
                     f"{summary['best_spread_ms'] or 0:.4f} ms")
        lines.append(f"  vs the starting kernel: {summary['root_time_ms']:.4f} ms -> "
                     f"{summary['speedup_vs_root']:.2f}x")
        if summary["vendor_time_ms"]:
            lines.append(f"  vs the vendor ({summary['vendor']}; {summary.get('vendor_source')}): "
                         f"{summary['vendor_time_ms']:.4f} ms -> {summary['speedup_vs_vendor']:.2f}x")
    found = summary["best_found_at_evaluation"]
    lines.append(f"  candidates evaluated: {summary['evaluations']} ({summary['nodes']} in the tree)"
                 + (f"; best found at evaluation {found}" if found else ""))
    if summary.get("stopped_by_time_limit"):
        lines.append(f"  stopped by the time limit before the budget of {summary['budget']} evaluations")
    elif summary["exhausted"]:
        lines.append(f"  the proposals ran out before the budget of {summary['budget']} evaluations")
    if summary.get("evaluation_seconds"):
        lines.append(f"  evaluations: {summary['full_gate']} by the full gate, {summary['screened_only']} "
                     f"by the screen only; {summary['evaluation_seconds']:.1f} s on the GPU host "
                     f"({summary['candidates_per_gpu_minute']:.1f} candidates per GPU-minute)")
    lines.append(f"  wall time: {summary['wall_s']:.1f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
