"""KLineage on a GPU host without Django.

    python -m lineage.engine list
    python -m lineage.engine walk --task relu --max-states 32 --record rec.json --json lineage.json
    python -m lineage.engine walk --task relu --replay rec.json --json lineage.json
    python -m lineage.engine walk-source --task relu --source k.cu --plan plan.json --json lineage.json
    python -m lineage.engine induce --lineages 'bench/results/*-h200-lineages*/lineage-*.json' \
        --probes 'bench/results/*-h200-probes/probes-*.json' --out cards.json

`walk` measures every state it visits with the full gate (no screen: every state of a
lineage is evidence), with one secret gate seed for the walk and its inputs kept on disk
between states, like a search. `--record` writes the measurements for replay in CI;
`--replay` serves them again, labelled as replayed.

`walk-source` does the same for a kernel without OPT_ flags (an upload): the LLM
configured by OPTIML_LLM_* (see docker/.env.example) removes one optimization a step
(llm_deopt.py).

`induce` groups the lineages' transitions by intent into skill cards (cards.py), with the
probes' order preconditions and risks when given.
"""

from __future__ import annotations

import argparse
import glob
import json
import secrets
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from profiling.harness import gate
from profiling.harness.gate import GateOptions
from profiling.harness.jsonfile import write_json_atomically
from profiling.harness.seeds import SEED_BITS
from search.engine.evaluators import GateEvaluator, RecordingEvaluator, ReplayEvaluator

from . import experts
from .walker import walk


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lineage.engine", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    verbs.add_parser("list", help="the experts and their flags")
    run = verbs.add_parser("walk", help="walk one expert backwards through the gate")
    run.add_argument("--task", required=True)
    run.add_argument("--max-states", type=int, default=64, help="states measured at most")
    run.add_argument("--replay", help="serve measurements recorded earlier (CI)")
    run.add_argument("--record", help="write every measurement here, for --replay")
    run.add_argument("--json", help="write the lineage here")
    run.add_argument("--workdir", help="inputs, logs and .ncu-rep files (a temp dir if unset)")
    run.add_argument("--gate-seed", type=int, help="the gate's seed (default: a random one, printed)")
    source = verbs.add_parser("walk-source", help="walk a kernel without flags backwards with an LLM")
    source.add_argument("--task", required=True)
    source.add_argument("--source", required=True, help="the kernel's .cu file")
    source.add_argument("--plan", required=True, help="its launch plan (JSON)")
    source.add_argument("--max-steps", type=int, default=8, help="accepted removals at most")
    source.add_argument("--attempts", type=int, default=2, help="model answers tried per step")
    for option in ("--replay", "--record", "--json", "--workdir"):
        source.add_argument(option, help=f"as for walk {option}")
    source.add_argument("--gate-seed", type=int, help="as for walk --gate-seed")
    induce = verbs.add_parser("induce", help="skill cards from recorded lineages (and probes)")
    induce.add_argument("--lineages", required=True, nargs="+", help="lineage JSON files or globs")
    induce.add_argument("--probes", nargs="*", default=[], help="probes JSON files or globs")
    induce.add_argument("--out", required=True, help="write the cards here (JSON)")
    return parser


def main(argv: Sequence[str] | None = None, out=print) -> int:
    args = build_parser().parse_args(argv)
    if args.verb == "list":
        for task in experts.tasks_with_experts():
            expert = experts.load(task)
            flags = ", ".join(f"{f.name}" + (f" (needs {', '.join(f.depends)})" if f.depends else "")
                              for f in expert.flags)
            out(f"{task}: {len(expert.states())} states; {flags}")
        return 0
    if args.verb == "walk-source":
        return walk_source(args, out)
    if args.verb == "induce":
        return induce(args, out)
    try:
        expert = experts.load(args.task)
    except experts.ExpertError as error:
        out(f"error: {error}")
        return 2
    evaluator = evaluator_for(args, out)
    if evaluator is None:
        return 2
    try:
        lineage = walk(expert, evaluator, max_states=args.max_states)
    finally:
        close_evaluator(evaluator)
    report(lineage, args.json, out)
    return 0


def expand_paths(patterns: Sequence[str]) -> list[Path]:
    """Files and globs (absolute or relative) -> the paths, globs sorted."""
    found: list[Path] = []
    for pattern in patterns:
        matches = sorted(glob.glob(pattern)) if any(c in pattern for c in "*?[") else [pattern]
        found.extend(Path(m) for m in matches)
    return found


def induce(args: argparse.Namespace, out) -> int:
    """`induce`: skill cards from lineage files (cards.py)."""
    from . import cards, probes
    from .walker import Lineage

    try:
        lineages = [Lineage.from_dict(json.loads(p.read_text())) for p in expand_paths(args.lineages)]
        probes_by_task = {}
        for path in expand_paths(args.probes):
            task, _gpu, found = probes.from_dict(json.loads(path.read_text()))
            probes_by_task.setdefault(task, []).extend(found)
    except (OSError, json.JSONDecodeError, TypeError, KeyError, ValueError) as error:
        out(f"error: {error}")
        return 2
    if not lineages:
        out("error: no lineage files matched")
        return 2
    found_cards = cards.induce(lineages, probes_by_task)
    write_json_atomically(args.out, {"format": cards.CARDS_FORMAT,
                                     "cards": [c.to_dict() for c in found_cards]}, indent=1)
    for card in found_cards:
        speed = card.effects["speedup"]
        needs = ", ".join(f"{name} ({', '.join(where)})"
                          for name, where in card.preconditions["order"]["required"].items()) or "-"
        out(f"{card.id}: {card.evidence['transitions']} steps in {len(card.scope['tasks'])} tasks, "
            f"median {speed.get('median', float('nan')):.2f}x; needs {needs}")
    out(f"{len(found_cards)} cards from {len(lineages)} lineages -> {args.out}")
    return 0


def walk_source(args: argparse.Namespace, out) -> int:
    """`walk-source`: the LLM de-optimizer over one uploaded kernel."""
    from profiling.harness import tasks
    from profiling.harness.candidate import Candidate, CandidateError
    from search.engine.judges import LLMConfigError, LLMJudge

    from .llm_deopt import walk_unmarked

    try:
        task = tasks.get(args.task)
        plan = json.loads(Path(args.plan).read_text())
        candidate = Candidate.from_source_and_plan(Path(args.source).read_text(), plan)
        llm = LLMJudge.from_env()
    except (tasks.UnknownTask, OSError, json.JSONDecodeError, CandidateError, LLMConfigError) as error:
        out(f"error: {error}")
        return 2
    evaluator = evaluator_for(args, out)
    if evaluator is None:
        return 2
    try:
        lineage = walk_unmarked(task, candidate, evaluator, llm, max_steps=args.max_steps,
                                attempts_per_step=args.attempts, expert=str(Path(args.source)))
    finally:
        close_evaluator(evaluator)
    usage = llm.usage
    out(f"{llm.name}: {usage.calls} requests, {usage.prompt_tokens + usage.completion_tokens} tokens")
    report(lineage, args.json, out)
    return 0


def close_evaluator(evaluator) -> None:
    close = getattr(evaluator, "close", None) or getattr(getattr(evaluator, "inner", None), "close", None)
    if close is not None:
        close()


def report(lineage, json_path: str | None, out) -> None:
    for t in lineage.transitions:
        speed = f"{t.speedup:.2f}x" if t.speedup else "?"
        out(f"  {t.before or '(plain)'} + {t.flag}: {t.before_ms} -> {t.after_ms} ms ({speed})")
    for r in lineage.rejected:
        out(f"  rejected: {r.start} - {r.flag}: {r.guard}: {r.precondition}")
    out(f"{len(lineage.states)} states, {len(lineage.transitions)} transitions, "
        f"{len(lineage.rejected)} rejected; reached the plain attempt: {lineage.complete}; "
        f"stopped: {lineage.stopped or '?'}")
    if json_path:
        write_json_atomically(json_path, lineage.to_dict(), indent=1)


def evaluator_for(args: argparse.Namespace, out):
    if args.replay:
        try:
            replay = ReplayEvaluator(args.replay)
        except ValueError as error:
            out(f"error: {error}")
            return None
        out(f"replaying measurements recorded on {replay.gpu} from {args.replay}")
        return replay
    if gate.gpu_name() is None:
        out("this host has no GPU (or no pycuda): use --replay recordings.json, or a GPU host")
        return None
    seed = args.gate_seed if args.gate_seed is not None else secrets.randbits(SEED_BITS)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="optiml-lineage-"))
    out(f"gate seed {seed} (--gate-seed {seed} checks on the same inputs again)")
    inner = GateEvaluator(GateOptions(workdir=str(workdir), seed=seed,
                                      input_cache=str(workdir / "inputs")))
    return RecordingEvaluator(inner, args.record) if args.record else inner


if __name__ == "__main__":
    sys.exit(main())
