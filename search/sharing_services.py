"""Writes that take a run to other people: read-only share links, and a run rebuilt from
an exported trajectory (search.selectors.run_trajectory writes the file,
search.importing.parse_trajectory checks it).
"""

from __future__ import annotations

import secrets

from django.db import transaction
from django.utils import timezone

from profiling import services as gate_services
from search import broadcast
from search.importing import ParsedTrajectory
from search.models import Run, RunEvent, ShareLink
from search.services import _append
from search.state import in_batches, json_size, node_rows_create, search_state_header

# -- share links ------------------------------------------------------------------------


@transaction.atomic
def share_create(*, run: Run, user=None) -> tuple[ShareLink, str]:
    """A new read-only link; returns it and its raw token, which is not stored anywhere."""
    token = secrets.token_urlsafe(32)  # 256 random bits
    link = ShareLink.objects.create(run=run, token_hash=ShareLink.digest(token), created_by=user)
    return link, token


def share_revoke(*, run: Run, share_id: int) -> bool:
    """Revoke a link of `run`; False when it has no such open link."""
    # Conditional update: revoking twice, or from two tabs at once, changes one row once.
    revoked = bool(ShareLink.objects.filter(pk=share_id, run=run, revoked_at__isnull=True)
                   .update(revoked_at=timezone.now()))
    if revoked:
        broadcast.share_revoked_after_commit(run_id=run.pk, share_id=share_id)
    return revoked


# -- import -----------------------------------------------------------------------------


@transaction.atomic
def run_import(*, trajectory: ParsedTrajectory, user=None, team=None) -> Run:
    """A read-only run rebuilt from an exported trajectory (checked by
    search.importing.parse_trajectory): its nodes from the search state, its events from
    the file. One transaction: a failure leaves nothing behind. No Evaluation rows are
    made, so an imported file can never pose as a measurement for later searches."""
    search = trajectory.search
    root = search.tree.root.proposal.candidate
    run = Run.objects.create(
        task=gate_services.task_get_or_sync(name=search.task),
        root_candidate=gate_services.candidate_get_or_create(source=root.source, plan=root.plan_dict()),
        judge=trajectory.judge, sources=trajectory.sources, budget=search.config.budget,
        seed=search.config.seed, gate_options={}, status=Run.Status.FINISHED,
        message=f"imported from run {trajectory.original_id}" if trajectory.original_id else "imported",
        state=search_state_header(trajectory.state), gpu_seconds=trajectory.gpu_seconds,
        created_by=user, team=team, imported=True, intent=trajectory.intent)
    # The state is kept as given (search_save would re-serialise it, with this server's judge).
    given = {node["id"]: node for node in trajectory.state["tree"]["nodes"]}
    node_rows_create(run, [(search.tree[node_id], given[node_id]) for node_id in sorted(search.tree.nodes)])
    # In batches (search.state.in_batches): one INSERT encodes all its JSON before sending it.
    numbered = enumerate(trajectory.events, start=1)
    for batch in in_batches(numbered, lambda event: json_size(event[1][1])):
        RunEvent.objects.bulk_create(RunEvent(run=run, seq=seq, kind=kind, data=data)
                                     for seq, (kind, data) in batch)
    run.next_seq = len(trajectory.events) + 1
    _append(run, "run_imported", {"from_run": trajectory.original_id})
    summary = search.summary()
    run.evaluated = search.evaluations
    run.root_ms, run.best_ms = summary["root_time_ms"], summary["best_time_ms"]
    run.best_node, run.best_found_at = summary["best_id"], summary["best_found_at_evaluation"]
    run.save()
    return run
