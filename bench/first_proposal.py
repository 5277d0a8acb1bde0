"""Wall time of a fresh process's first skills proposal on a transfer task's naive kernel (issue 31's cost
target: under 1 s). Usage: OPTIML_SKILL_CARDS=skeletons python bench/first_proposal.py <task>"""
import sys
import time

t0 = time.perf_counter()
from bench import transfer_suite  # noqa: E402
from lineage.engine.skills import SkillSource  # noqa: E402
from profiling.harness import tasks  # noqa: E402
from profiling.harness.candidate import Candidate  # noqa: E402
from search.engine.types import NodeContext  # noqa: E402

tasks.add_directory(transfer_suite.TASK_DIR)
t1 = time.perf_counter()
task = tasks.get(sys.argv[1])
candidate = Candidate.from_source_and_plan(task.naive_source, task.naive_plan)
ctx = NodeContext(task=task.name, candidate=candidate, measurement=None, diagnosis=None)
source = SkillSource()
proposals = source.propose(ctx)
t2 = time.perf_counter()
print(f"{sys.argv[1]}: imports {t1 - t0:.2f} s, first proposal {t2 - t1:.2f} s, {len(proposals)} proposals:",
      [p.source for p in proposals])
