"""manage.py lineage list | show <id> | walk --task T [--queue] | request <id> | import <file.json>
               | induce [--probes GLOB ...] | admit <admission.json> | bootstrap [--force]
               | skeletons | skills [--intent I] | skill <card id>

`walk` runs the de-optimization walker here (a GPU host; `--replay` serves recordings) and
stores the lineage; with `--queue` a GPU worker runs it instead (`request <id>` says how
it stands); `import` stores one walked elsewhere (`python -m lineage.engine walk --json`).
Each writes all rows of a lineage or none. `induce` turns the stored lineages into skill
cards (lineage/engine/cards.py), with the probes' files for order preconditions; `admit`
sets their status from a roundtrip (bench/cards_admission.py writes the file): only
verified cards feed the app's searches. `bootstrap` does import, induce and admit for the
recordings committed under bench/results when the default library is empty (`make start`
runs it; with --force, again); it also stores the skeleton cards into a library that
holds none. `skeletons` stores them again from the recordings (after a new admission by
transfer under bench/results), keeping reviewers' decisions.
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from lineage import bootstrap, selectors, services, skeleton_services
from lineage.engine import experts
from lineage.engine.__main__ import evaluator_for, expand_paths
from lineage.engine.walker import walk


class Command(BaseCommand):
    help = "KLineage: walk experts backwards into lineages, list, show and import them"

    def add_arguments(self, parser):
        verbs = parser.add_subparsers(dest="verb", required=True)
        listing = verbs.add_parser("list", help="stored lineages")
        listing.add_argument("--task")
        show = verbs.add_parser("show", help="one lineage's transitions and rejected attempts")
        show.add_argument("id", type=int)
        run = verbs.add_parser("walk", help="walk an expert here and store the lineage")
        run.add_argument("--task", required=True)
        run.add_argument("--max-states", type=int, default=64)
        run.add_argument("--replay")
        run.add_argument("--record")
        run.add_argument("--workdir")
        run.add_argument("--gate-seed", type=int)
        run.add_argument("--queue", action="store_true",
                         help="queue the walk for a GPU worker (the gpu queue) instead of walking here")
        status = verbs.add_parser("request", help="how a queued walk stands")
        status.add_argument("id", type=int)
        imported = verbs.add_parser("import", help="store a lineage JSON walked elsewhere")
        imported.add_argument("file")
        induce = verbs.add_parser("induce", help="skill cards from the stored lineages")
        induce.add_argument("--probes", nargs="*", default=[], help="probes JSON files or globs")
        admit = verbs.add_parser("admit", help="set the cards' status from a roundtrip's admission file")
        admit.add_argument("file")
        admit.add_argument("--team", type=int, help="the team whose library's cards the roundtrip tried "
                                                    "(left out: the default library)")
        bootstrap = verbs.add_parser("bootstrap", help="fill an empty default library from the recorded "
                                                        "lineages, probes and admission in this tree")
        bootstrap.add_argument("--force", action="store_true", help="even when it holds cards already")
        verbs.add_parser("skeletons", help="store the skeleton cards induced from the recorded "
                                           "lineages, with their newest admission by transfer, into the "
                                           "default library")
        skills = verbs.add_parser("skills", help="the stored skill cards")
        skills.add_argument("--intent")
        skill = verbs.add_parser("skill", help="one skill card")
        skill.add_argument("card_id")

    def handle(self, *args, **options):
        verb = options["verb"]
        if verb == "list":
            for row in selectors.lineage_list(task=options.get("task")):
                self.stdout.write(f"{row.pk}: {row.task.name} on {row.gpu or '?'} ({row.origin}"
                                  f"{', replayed' if row.replayed else ''}): {row.state_count} states, "
                                  f"{row.transition_count} transitions, {row.rejected_count} rejected"
                                  f"{', complete' if row.complete else ''}")
        elif verb == "show":
            self._show(options["id"])
        elif verb == "walk" and options["queue"]:
            self._queue(options)
        elif verb == "walk":
            self._walk(options)
        elif verb == "request":
            self._request(options["id"])
        elif verb == "induce":
            self._induce(options["probes"])
        elif verb == "admit":
            self._admit(Path(options["file"]), options["team"])
        elif verb == "bootstrap":
            self._bootstrap(options["force"])
        elif verb == "skeletons":
            rows = skeleton_services.skeleton_cards_store()
            self.stdout.write(f"the default library: {len(rows)} skeleton cards ("
                              + ", ".join(f"{row.card_id} {row.status}" for row in rows) + ")")
        elif verb == "skills":
            for row in selectors.skill_card_list(intent=options.get("intent")):
                speed = row.data["effects"]["speedup"]
                median = f"median {speed['median']:.2f}x" if speed.get("n") else "no speed-up measured"
                steps = row.data["evidence"]["transitions"]
                self.stdout.write(f"{row.card_id} ({row.status}): {steps} steps from {row.lineage_count} "
                                  f"lineages, {median}; anchor {row.data['anchor']['status']}")
        elif verb == "skill":
            self._skill(options["card_id"])
        else:
            self._import(Path(options["file"]))

    def _show(self, pk: int) -> None:
        row = selectors.lineage_get(pk=pk)
        if row is None:
            raise CommandError(f"no lineage {pk}")
        self.stdout.write(str(row))
        self.stdout.write(f"  stopped: {row.stopped or '(not recorded)'}")
        for t in row.transitions.order_by("pk"):
            speed = f"{t.speedup:.2f}x" if t.speedup else "?"
            self.stdout.write(f"  {t.before or '(plain)'} + {t.flag}: {speed}  [{t.proposer}]")
        for r in row.rejected.order_by("pk"):
            self.stdout.write(f"  rejected: {r.start} - {r.flag}: {r.guard}: {r.precondition}"
                              f"  [{r.proposer}]")

    def _queue(self, options) -> None:
        if options.get("replay") or options.get("record"):
            raise CommandError("--queue walks on a GPU worker: --replay and --record are for walks here")
        try:
            request = services.walk_request_create(task_name=options["task"],
                                                   max_states=options["max_states"])
        except services.WalkRequestError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"queued walk request {request.pk} of {request.task.name} for a GPU worker "
                          f"(manage.py lineage request {request.pk})")

    def _request(self, pk: int) -> None:
        request = selectors.walk_request_get(pk=pk)
        if request is None:
            raise CommandError(f"no walk request {pk}")
        self.stdout.write(str(request))
        if request.lineage_id:
            self.stdout.write(f"  lineage {request.lineage_id}: {request.lineage.stopped}")
        if request.error:
            self.stdout.write(f"  error: {request.error}")

    def _walk(self, options) -> None:
        try:
            expert = experts.load(options["task"])
        except experts.ExpertError as error:
            raise CommandError(str(error)) from None
        args = type("Args", (), {k.replace("-", "_"): v for k, v in options.items()})
        evaluator = evaluator_for(args, self.stdout.write)
        if evaluator is None:
            raise CommandError("nothing to measure with: no GPU here and no --replay")
        lineage = walk(expert, evaluator, max_states=options["max_states"])
        row = services.lineage_store(lineage=lineage, origin="walk")
        self.stdout.write(f"stored lineage {row.pk}: {len(lineage.states)} states, "
                          f"{len(lineage.transitions)} transitions, {len(lineage.rejected)} rejected")

    def _induce(self, patterns: list[str]) -> None:
        from lineage.engine import probes

        found: dict[str, list] = {}
        for path in expand_paths(patterns):
            try:
                task, _gpu, items = probes.from_dict(json.loads(path.read_text()))
            except (OSError, ValueError, KeyError, TypeError) as error:
                raise CommandError(f"cannot read probes {path}: {error}") from None
            found.setdefault(task, []).extend(items)
        rows = services.cards_induce(probes=found)
        self.stdout.write(f"stored {len(rows)} skill cards from the stored lineages "
                          f"({sum(len(v) for v in found.values())} probes)")

    def _team(self, team_id: int | None):
        from accounts.models import Team

        if team_id is None:
            return None
        team = Team.objects.filter(pk=team_id).first()
        if team is None:
            raise CommandError(f"no team {team_id}")
        return team

    def _admit(self, path: Path, team_id: int | None = None) -> None:
        try:
            admission = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CommandError(f"cannot read {path}: {error}") from None
        try:
            rows = services.cards_admit(admission=admission, team=self._team(team_id))
        except services.AdmissionError as error:
            raise CommandError(str(error)) from None
        counts: dict[str, int] = {}
        for row in rows:
            counts[row.status] = counts.get(row.status, 0) + 1
        said = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
        self.stdout.write(f"{len(rows)} skill cards: {said}")

    def _bootstrap(self, force: bool) -> None:
        try:
            outcome = bootstrap.skill_library_bootstrap(force=force)
        except bootstrap.BootstrapError as error:
            raise CommandError(str(error)) from None
        if not outcome.done:
            added = (f"; stored its {outcome.skeletons_added} skeleton cards" if outcome.skeletons_added
                     else "")
            self.stdout.write(f"the default library holds {outcome.cards_before} skill cards already{added}: "
                              "nothing else to do (lineage bootstrap --force fills it again)")
            return
        def said(statuses: dict[str, int]) -> str:
            return ", ".join(f"{n} {status}" for status, n in sorted(statuses.items(),
                                                                     key=lambda item: (-item[1], item[0])))

        self.stdout.write(f"the default library: {sum(outcome.statuses.values())} skill cards "
                          f"({said(outcome.statuses)}) and {outcome.skeletons_added} skeleton cards "
                          f"({said(outcome.skeleton_statuses)}) from "
                          f"{outcome.lineages_imported + outcome.lineages_kept} recorded lineages "
                          f"({outcome.lineages_imported} imported, {outcome.lineages_kept} stored already), "
                          f"admitted from {outcome.admission}, in {outcome.seconds:.1f} s")

    def _skill(self, card_id: str) -> None:
        row = selectors.skill_card_get(card_id=card_id)
        if row is None:
            raise CommandError(f"no skill card {card_id!r} (manage.py lineage skills lists them)")
        card = row.data
        self.stdout.write(f"{row.card_id} ({row.status}): {card['sentence']}")
        if card.get("kind") == "skeleton":
            self.stdout.write(f"  skeleton {card['skeleton']} of the {card['family']} family, from the "
                              f"lineages of {', '.join(card['tasks'])}; admission by transfer: "
                              f"{card['admission'].get('status', 'untried')}")
            for risk in card["risks"][:5]:
                self.stdout.write(f"  risk: {risk['task']}: {risk['message']}")
            return
        required = card["preconditions"]["order"]["required"]
        self.stdout.write("  needs first: " + (", ".join(f"{k} ({', '.join(v)})" for k, v in required.items())
                                               or "nothing the probes showed"))
        for context in card["preconditions"]["context"][:5]:
            self.stdout.write(f"  context: {context['reads']} ({context['median_speedup_with']:.2f}x "
                              f"against {context['median_speedup_without']:.2f}x)")
        for rewrite in card["anchor"].get("rewrites", []):
            self.stdout.write(f"  rewrite: {rewrite['before']}  ->  {rewrite['after']}"
                              f"  [{', '.join(rewrite['tasks'])}]")
        for risk in card["risks"][:5]:
            self.stdout.write(f"  risk: {risk['kind']} in {risk['task']}")

    def _import(self, path: Path) -> None:
        try:
            data = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise CommandError(f"cannot read {path}: {error}") from None
        try:
            row = services.lineage_store(lineage=services.lineage_parse(data), origin="import")
        except services.LineageImportError as error:
            raise CommandError(str(error)) from None
        self.stdout.write(f"stored lineage {row.pk} of {row.task.name}")
