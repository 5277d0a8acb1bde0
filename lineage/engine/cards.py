"""Skill cards induced from lineages (KLineage part 2, first step): one card per intent.

Every forward transition of every lineage with the same intent (the same vocabulary
name: a float4 load in relu and in softmax are both VEC4) is grouped into one card:

- intent: the name, its sentence and family (vocabulary.py);
- vector: the concrete steps behind it, one representative per lineage (the transition
  with the fewest other optimizations on: the plainest place the step was taken), with
  its source and launch-plan diffs; the others as references;
- preconditions:
  - order, from the lineages (the intents that were on in every before-state of the
    card's steps, per task) and from the probes (probes.py: an order the step was
    refused or did nothing without is `required`, one it passed without is `chosen`);
  - context, from the lineages' alternative orders: within a task, for each other intent
    that was on in some before-states of the step and off in others, the median speed-up
    with it and without it (the lattice walk measures the same step in many contexts:
    this is where the lineages say *when* a step pays, e.g. sgemm's tensor cores only once
    a pipeline feeds them);
  - profile, from the before-states' bottleneck where a profile was taken: the classes
    the step helped in and those it did not (states that were only screened carry no
    profile, and the card says how many of its steps had one);
- effects: the measured speed-ups (min, median, max) overall and per task, and the
  median metric deltas where profiles exist;
- risks: what refused the step without its prerequisites (probe rejections, with the
  guard and message), rejected attempts of lineages, and the steps that made the kernel
  slower (speed-up below 1 - NOISE);
- scope: CUDA, sm_90 (the H200 the lineages were measured on), the tasks and their
  roofline classes (memory- or compute-bound from the arithmetic intensity at the
  suite's sizes against the H200's ridge point), the proposers (flags, llm:<model>);
- evidence: the lineages and transitions behind it, with counts.

- anchor: the code surface the step acts on and its generalised rewrites
  (antiunify.py): the edits of the card's steps (one step per lineage), clustered and
  anti-unified into patterns with holes, each with the tasks it came from and the suite's
  naive kernels (written before and apart from the experts) it matches, those outside
  its own lineages said apart; and each step whole (its edits, where they act, its
  launch change) for replaying it. A match is only a proposal: whether the materialised
  kernel is right and faster is the gate's question in the search (skills.py), and
  whether a card reproduces its effect the roundtrip gate's (admission.py).

Pure: plain data in (walker.Lineage, probes.Probe), plain data out.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from profiling.harness import tasks

from . import antiunify, experts
from .probes import NO_EFFECT, Probe
from .vocabulary import INTENTS, flag_name, intent_of
from .walker import Lineage, Transition

CARDS_FORMAT = 1
# A speed-up within this of 1 is noise (the screen's timing spread on the H200 is well
# under 1 %; 2 % keeps a step that moved nothing out of both "helped" and "hurt").
NOISE = 0.02
# The H200's ridge point: fp32 FMA peak over the copy ceiling (../shared/GPU.md):
# 67 TFLOP/s / 4.25 TB/s, about 15.8 flops a byte.
RIDGE_FLOPS_PER_BYTE = 67e12 / 4.25e12


@dataclass
class SkillCard:
    id: str
    intent: str
    sentence: str
    family: str
    anchor: dict[str, Any]
    vector: list[dict[str, Any]]
    preconditions: dict[str, Any]
    effects: dict[str, Any]
    risks: list[dict[str, Any]]
    scope: dict[str, Any]
    evidence: dict[str, Any]
    format: int = CARDS_FORMAT
    steps: list[dict[str, Any]] = field(default_factory=list)  # every transition, as a reference

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def roofline_class(task_name: str) -> str:
    """"memory-bound" or "compute-bound": the task's flops per compulsory byte at its
    suite sizes against the H200's ridge point."""
    task = tasks.get(task_name)
    intensity = task.flops(task.sizes) / task.bytes(task.sizes)
    return "compute-bound" if intensity > RIDGE_FLOPS_PER_BYTE else "memory-bound"


Sources = Callable[[Lineage, str], "str | None"]


def expert_sources(lineage: Lineage, state: str) -> str | None:
    """A state's plain source from the expert in the tree, if the state is still its own
    (the recorded candidate hash is what the expert's flags give today)."""
    try:
        expert = experts.load(lineage.task)
    except experts.ExpertError:
        return None
    record = lineage.states.get(state)
    flags = frozenset(f for f in state.split(",") if f)
    if record is None or not expert.valid(flags):
        return None
    if expert.candidate(flags).content_hash() != record.candidate_hash:
        return None  # the expert changed since the walk
    return expert.plain_source(flags)


def expert_plan(lineage: Lineage, state: str) -> dict[str, Any] | None:
    """A state's launch plan as written (Expert.written_plan), where expert_sources gives
    its source: a step's launch change goes with its edits."""
    if expert_sources(lineage, state) is None:
        return None
    return experts.load(lineage.task).written_plan(frozenset(f for f in state.split(",") if f))


def induce(lineages: list[Lineage], probes_by_task: dict[str, list[Probe]] | None = None,
           sources: Sources | None = expert_sources) -> list[SkillCard]:
    """One card per intent that some lineage's transition has, by intent name. `sources`
    gives a state's plain source for the anchors (None: no anchors)."""
    probes_by_task = probes_by_task or {}
    naive = {t.name: t.naive_source for t in tasks.all_tasks()}
    by_intent: dict[str, list[tuple[Lineage, Transition]]] = defaultdict(list)
    for lineage in lineages:
        for step in lineage.transitions:
            by_intent[step.intent].append((lineage, step))
    return [_card(intent, steps, lineages, probes_by_task, sources, naive)
            for intent, steps in sorted(by_intent.items())]


def _card(intent: str, steps: list[tuple[Lineage, Transition]], lineages: list[Lineage],
          probes_by_task: dict[str, list[Probe]], sources: Sources | None,
          naive: dict[str, str]) -> SkillCard:
    meaning = INTENTS[intent]
    task_names = sorted({lineage.task for lineage, _ in steps})
    speedups = [s.speedup for _, s in steps if s.speedup]
    vector = _vector(steps)
    return SkillCard(
        id=f"{intent.lower()}-v1", intent=intent, sentence=meaning.sentence, family=meaning.family,
        anchor=_anchor(_with_spine(_representatives(steps), steps), sources, naive),
        vector=vector,
        preconditions={"order": _order(intent, steps, probes_by_task), "context": _context(steps),
                       "profile": _profile(steps)},
        effects={"speedup": speedup_stats(speedups),
                 "by_task": {t: speedup_stats([s.speedup for lin, s in steps if lin.task == t and s.speedup])
                             for t in task_names},
                 "metric_deltas": _median_deltas(steps)},
        risks=_risks(intent, steps, lineages, probes_by_task),
        scope={"language": "CUDA", "arch": "sm_90", "gpu": sorted({lin.gpu for lin, _ in steps if lin.gpu}),
               "tasks": task_names, "roofline": sorted({roofline_class(t) for t in task_names}),
               "proposers": sorted({s.proposer for _, s in steps})},
        evidence={"lineages": len({id(lin) for lin, _ in steps}), "transitions": len(steps),
                  "by_task": {t: sum(lin.task == t for lin, _ in steps) for t in task_names},
                  "helped": sum(s.speedup > 1 + NOISE for s in speedups_of(steps)),
                  "neutral": sum(abs(s.speedup - 1) <= NOISE for s in speedups_of(steps)),
                  "hurt": sum(s.speedup < 1 - NOISE for s in speedups_of(steps))},
        steps=[{"task": lin.task, "expert": lin.expert, "before": s.before, "after": s.after,
                "speedup": s.speedup, "proposer": s.proposer} for lin, s in steps],
    )


def speedups_of(steps: list[tuple[Lineage, Transition]]) -> list[Transition]:
    return [s for _, s in steps if s.speedup]


def _flags(state: str) -> set[str]:
    return {f for f in state.split(",") if f}


def spine(lineage: Lineage) -> list[Transition]:
    """The lineage's best forward path: from the plain attempt, at each state the measured
    step with the largest speed-up, until no step leads on (the order a person following
    the lineage would take)."""
    by_before: dict[str, list[Transition]] = defaultdict(list)
    for step in lineage.transitions:
        by_before[step.before].append(step)
    path, state, visited = [], "", set()
    while by_before.get(state) and state not in visited:
        visited.add(state)
        best = max(by_before[state], key=lambda t: (t.speedup or 0.0, t.after))
        path.append(best)
        state = best.after
    return path


def _with_spine(representatives: list[tuple[Lineage, Transition]],
                steps: list[tuple[Lineage, Transition]]) -> list[tuple[Lineage, Transition]]:
    """The representatives, and the card's steps on each lineage's spine: the steps a
    roundtrip from the plain attempt takes."""
    chosen = list(representatives)
    have = {(id(lin), s.before, s.after) for lin, s in chosen}
    spines: dict[int, set[tuple[str, str]]] = {}
    for lineage, step in steps:
        if id(lineage) not in spines:
            spines[id(lineage)] = {(t.before, t.after) for t in spine(lineage)}
        on_spine = (step.before, step.after) in spines[id(lineage)]
        if on_spine and (id(lineage), step.before, step.after) not in have:
            chosen.append((lineage, step))
            have.add((id(lineage), step.before, step.after))
    return sorted(chosen, key=lambda pair: (pair[0].task, len(_flags(pair[1].before))))


def _representatives(steps: list[tuple[Lineage, Transition]]) -> list[tuple[Lineage, Transition]]:
    """Per lineage, the step taken with the fewest other optimizations on."""
    chosen: dict[int, tuple[Lineage, Transition]] = {}
    for lineage, step in steps:
        best = chosen.get(id(lineage))
        if best is None or len(_flags(step.before)) < len(_flags(best[1].before)):
            chosen[id(lineage)] = (lineage, step)
    return sorted(chosen.values(), key=lambda pair: pair[0].task)


def _vector(steps: list[tuple[Lineage, Transition]]) -> list[dict[str, Any]]:
    return [{"task": lin.task, "expert": lin.expert, "before": s.before, "after": s.after,
             "speedup": s.speedup, "source_diff": s.source_diff, "plan_diff": s.plan_diff,
             "proposer": s.proposer}
            for lin, s in _representatives(steps)]


def _anchor(representatives: list[tuple[Lineage, Transition]], sources: Sources | None,
            naive: dict[str, str]) -> dict[str, Any]:
    """The card's generalised rewrites, from its representative steps' edits."""
    if sources is None:
        return {"status": "not induced", "why": "no sources given for the lineages' states"}
    edits: list[antiunify.Edit] = []
    where: list[str] = []
    missing = 0
    spans: list[tuple[Lineage, Transition, int, int]] = []  # a step's edits: edits[start:end]
    for lineage, step in representatives:
        before, after = sources(lineage, step.before), sources(lineage, step.after)
        if before is None or after is None:
            missing += 1
            continue
        start = len(edits)
        for edit in antiunify.edits_of(before, after):
            edits.append(edit)
            where.append(lineage.task)
        spans.append((lineage, step, start, len(edits)))
    rewrites = []
    grouped = antiunify.cluster(edits)
    general_for: dict[int, antiunify.Rewrite] = {}  # edit index -> its cluster's generalised rewrite
    for rewrite, members in grouped:
        if rewrite.usable and len({where[i] for i in members}) > 1 and rewrite.holes > 0:
            general_for.update({i: rewrite for i in members})
    for rewrite, members in grouped:
        if not rewrite.usable:
            continue
        own = sorted({where[i] for i in members})
        matches = sorted(name for name, source in naive.items() if antiunify.apply(rewrite, source))
        shown = rewrite.to_dict()
        shown["bindings"] = [[text[:200] for text in texts] for texts in shown["bindings"]]
        rewrites.append({**shown, "tasks": own, "edits": len(members),
                         "generalised": len(own) > 1 and rewrite.holes > 0,
                         # Some step was this rewrite alone (every edit of it a member):
                         # only then is the rewrite, made wherever it matches, a whole
                         # optimization (one edit of larger steps, alone, is half of one:
                         # a float4 typedef without the float4 loads).
                         "alone": any(end > start and set(range(start, end)) <= set(members)
                                      for _, _, start, end in spans),
                         "matches_naive": matches,
                         "matches_naive_elsewhere": [m for m in matches if m not in own]})
    generalised = [r for r in rewrites if r["generalised"]]
    return {"status": "induced" if generalised else ("concrete only" if rewrites else "none usable"),
            "steps": _steps(spans, edits, general_for, sources),
            "kinds": sorted({e.kind for e in edits}), "edits": len(edits),
            "steps_without_sources": missing, "rewrites": rewrites,
            "generalised": len(generalised),
            "matches_naive_elsewhere": sorted({m for r in generalised for m in r["matches_naive_elsewhere"]})}


def _steps(spans: list[tuple[Lineage, Transition, int, int]], edits: list[antiunify.Edit],
           general_for: dict[int, antiunify.Rewrite], sources: Sources) -> list[dict[str, Any]]:
    """Each representative (and spine) step as the rewrites of all its edits, to apply
    together: `edits`, each edit's own (from this one example: what the roundtrip on the
    step's own lineage replays), and `general_edits`, its cluster's generalised rewrite
    where it has one (what transfers); `sites` and `general_sites`, where each edit acts
    in its own before-state (antiunify.sites_toward). `complete` is false when some edit
    has no usable rewrite (the step cannot be replayed by patterns alone)."""
    steps = []
    for lineage, step, start, end in spans:
        own, general, complete = [], [], end > start
        before, after = expert_plan(lineage, step.before), expert_plan(lineage, step.after)
        for index in range(start, end):
            rewrite = antiunify.generalise([edits[index]])
            if rewrite is None or not rewrite.usable:
                complete = False
                continue
            own.append(rewrite.to_dict()["tree"])
            general.append((general_for.get(index) or rewrite).to_dict()["tree"])
        replay: dict[str, Any] = {}
        source_before, source_after = sources(lineage, step.before), sources(lineage, step.after)
        if source_before is not None and source_after is not None:
            own, complete, replay = _replayable(own, complete, source_before, source_after)
            replay["general_sites"] = antiunify.sites_toward(general, source_before, source_after)
        steps.append({"task": lineage.task, "before": step.before, "after": step.after,
                      "speedup": step.speedup, "edits": own, "general_edits": general,
                      "complete": complete, **replay, **_launch_change(before, after)})
    return steps


def _replayable(own: list[dict[str, Any]], complete: bool, before: str,
                after: str) -> tuple[list[dict[str, Any]], bool, dict[str, Any]]:
    """A step's own edits, checked: made at their sites on the step's before-state they
    must give the after-state token for token (`replays`). Where the fine edits do not
    (one change's edit swallowed another's, or some edit had no usable rewrite), the step
    is replayed by one edit covering every change (antiunify.edit_of: the smallest unit
    holding them all), if that one does; else by the concrete vector itself (`whole`:
    the after-state's source, for a kernel whose tokens are the before-state's): a step
    replayed so generalises to nothing, and says so (`merged`)."""
    def check(trees: list[dict[str, Any]]) -> tuple[list[list[int]] | None, bool]:
        sites = antiunify.sites_toward(trees, before, after)
        made = antiunify.apply_at_sites(trees, sites, before) if sites is not None else None
        return sites, made is not None and antiunify.source_tokens(made) == antiunify.source_tokens(after)

    sites, replays = check(own) if complete else (None, False)
    if not replays:
        merged = antiunify.edit_of(before, after)
        rewrite = antiunify.generalise([merged]) if merged is not None else None
        if rewrite is not None and rewrite.usable:
            whole = [rewrite.to_dict()["tree"]]
            whole_sites, whole_replays = check(whole)
            if whole_replays:
                return whole, True, {"sites": whole_sites, "replays": True, "merged": "edit"}
        return own, True, {"sites": sites, "replays": True, "merged": "source",
                           "whole": {"before": antiunify.tokens_digest(before), "after": after}}
    return own, complete, {"sites": sites, "replays": replays, "merged": ""}


def _launch_change(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    """What a step does to the launch plan: the launches' grid, block and shared bytes
    before and after (each as written, expr.fold), and the tunables they and the source
    may use. skills.step_plan applies it to a kernel whose launches equal `before` at the
    task's sizes. Empty when a plan is unknown (the step is then replayed on source alone)."""
    if before is None or after is None:
        return {}

    def dims(plan: dict[str, Any]) -> list[dict[str, Any]]:
        return [{k: launch.get(k, default) for k, default in
                 (("grid", [1]), ("block", [1]), ("shared_bytes", 0))} for launch in plan["launches"]]

    return {"launches": {"before": dims(before), "after": dims(after)},
            "tunables": dict(after.get("tunables", {}))}


def _intents_of(flags: set[str]) -> set[str]:
    return {intent_of(f).name for f in flags}


def _order(intent: str, steps: list[tuple[Lineage, Transition]],
           probes_by_task: dict[str, list[Probe]]) -> dict[str, Any]:
    """Per task, what was always on before the step, and what the probes made of it."""
    by_task: dict[str, dict[str, Any]] = {}
    for task in sorted({lin.task for lin, _ in steps}):
        befores = [_intents_of(_flags(s.before)) for lin, s in steps if lin.task == task]
        always = set.intersection(*befores) if befores else set()
        probed = [p for p in probes_by_task.get(task, []) if intent_of(p.flag).name == intent]
        required = sorted(intent_of(p.missing).name for p in probed if p.precondition_held)
        chosen = sorted(intent_of(p.missing).name for p in probed if p.status == "passed")
        by_task[task] = {"always_on_before": sorted(always), "required": required, "chosen": chosen}
    # Which intent must come first, and in which tasks the probes showed it.
    required: dict[str, list[str]] = defaultdict(list)
    for task, entry in by_task.items():
        for intent_name in entry["required"]:
            required[intent_name].append(task)
    return {"required": dict(sorted(required.items())), "by_task": by_task}


def _context(steps: list[tuple[Lineage, Transition]], keep: int = 8) -> list[dict[str, Any]]:
    """Within each task, the other intents whose presence before the step moved its
    speed-up most: the median with and without, for each intent that was on in some of the
    step's contexts there and not all (within a task, so that one task's kernels do not
    stand in for a context). Kept where the two medians differ by more than NOISE,
    largest ratio first."""
    found = []
    for task in sorted({lin.task for lin, _ in steps}):
        measured = [(_intents_of(_flags(s.before)), s.speedup) for lin, s in steps
                    if lin.task == task and s.speedup]
        seen = set().union(*(before for before, _ in measured)) if measured else set()
        for other in sorted(seen):
            with_it = [x for before, x in measured if other in before]
            without = [x for before, x in measured if other not in before]
            if not with_it or not without:
                continue
            a, b = statistics.median(with_it), statistics.median(without)
            if abs(a / b - 1) <= NOISE:
                continue
            reads = (f"helps with {other}" if a > 1 + NOISE >= b else
                     f"helps without {other}" if b > 1 + NOISE >= a else
                     f"{'more' if a > b else 'less'} with {other}")
            found.append({"task": task, "with": other, "median_speedup_with": a,
                          "median_speedup_without": b, "n_with": len(with_it),
                          "n_without": len(without), "reads": f"{task}: {reads}"})
    found.sort(key=lambda c: -abs(math.log(c["median_speedup_with"] / c["median_speedup_without"])))
    return found[:keep]


def _profile(steps: list[tuple[Lineage, Transition]]) -> dict[str, Any]:
    """The before-states' bottleneck classes where a profile said one."""
    helped: dict[str, int] = defaultdict(int)
    not_helped: dict[str, int] = defaultdict(int)
    profiled = 0
    for _, step in steps:
        bottleneck = (step.diagnosis_before or {}).get("bottleneck")
        if not bottleneck or bottleneck == "unknown" or not step.speedup:
            continue
        profiled += 1
        (helped if step.speedup > 1 + NOISE else not_helped)[bottleneck] += 1
    return {"helped_in": dict(helped), "not_helped_in": dict(not_helped), "profiled_steps": profiled,
            "steps": len(steps)}


def speedup_stats(values: list[float]) -> dict[str, Any]:
    """{n, min, median, max} of measured speed-ups; {n: 0} for none (skeleton cards use it too)."""
    if not values:
        return {"n": 0}
    return {"n": len(values), "min": min(values), "median": statistics.median(values), "max": max(values)}


def _median_deltas(steps: list[tuple[Lineage, Transition]]) -> dict[str, float]:
    found: dict[str, list[float]] = defaultdict(list)
    for _, step in steps:
        for metric, delta in step.metric_deltas.items():
            found[metric].append(delta)
    return {metric: statistics.median(values) for metric, values in sorted(found.items())}


def _risks(intent: str, steps: list[tuple[Lineage, Transition]], lineages: list[Lineage],
           probes_by_task: dict[str, list[Probe]]) -> list[dict[str, Any]]:
    risks: list[dict[str, Any]] = []
    for task, found in sorted(probes_by_task.items()):
        for p in found:
            if intent_of(p.flag).name != intent or not p.precondition_held:
                continue
            risks.append({"kind": "no_effect_without" if p.status == NO_EFFECT else "refused_without",
                          "task": task, "without": intent_of(p.missing).name, "guard": p.guard,
                          "message": p.message[:300], "state": p.state})
    flag = flag_name(intent)
    for lineage in lineages:
        for rejected in lineage.rejected:
            if rejected.flag == flag:
                risks.append({"kind": "rejected_in_lineage", "task": lineage.task, "guard": rejected.guard,
                              "message": rejected.message[:300], "state": rejected.state,
                              "precondition": rejected.precondition})
    for lineage, step in steps:
        if step.speedup and step.speedup < 1 - NOISE:
            risks.append({"kind": "slower", "task": lineage.task, "before": step.before,
                          "speedup": step.speedup})
    return risks
