"""The explorer in a real Chromium: sign in, start a relu run from the new-session form
(showing field errors on the way), watch its tree grow live while the search is driven,
inspect nodes (diff, deltas, roofline), share the run and open the link signed out.

The app is served by daphne (`manage.py runserver`, which serves optiml_web.asgi) on a
free port over a temporary SQLite database, with the real H200 recording of naive relu as
the evaluator (its children have no recording and fail, which the tree shows). The
browser side is tests/e2e/explorer.mjs (playwright-core, from frontend/node_modules);
this test starts the server, drives the run when the script says it exists, and checks
what the script saw. Screenshots go to build/e2e/.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
SCRIPT = Path(__file__).with_name("explorer.mjs")
SHOTS = REPO / "build" / "e2e"
# Five kernels of a relu search really measured on the H200 (the float4 rewrite among
# them): the explorer shows real times and metric deltas, replayed and labelled so.
RECORDING = "tests/fixtures/recorded/h200-relu-search.json"
USER, PASSWORD = "ada", "analytical-engine-1843"
STEP_PAUSE_S = 0.6  # between search steps, so that the browser sees the tree grow
SCRIPT_TIMEOUT_S = 240


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return "needs Chromium at /usr/bin/chromium (apt-get install chromium; .ci/run installs it)"
    if shutil.which("node") is None:
        return "needs Node.js for playwright-core"
    if not (REPO / "frontend" / "node_modules" / "playwright-core").is_dir():
        return "needs the front end's packages: run `make frontend`"
    if not (REPO / "frontend" / "dist" / "assets" / "main.js").is_file():
        return "needs the built front end: run `make frontend`"
    return None


MISSING = _missing()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]


@pytest.fixture
def app_env(tmp_path: Path) -> dict[str, str]:
    # A database of its own: SQLite in a temporary folder, whatever the outer run uses
    # (CI points DATABASE_URL at PostgreSQL); no Redis, so live views poll the database.
    dropped = {"DATABASE_URL", "DATABASE_URL_FILE", "REDIS_URL", "REDIS_URL_FILE"}
    env = {key: value for key, value in os.environ.items() if key not in dropped}
    env.update(
        OPTIML_VAR_DIR=str(tmp_path / "var"),
        OPTIML_EVALUATOR=f"recorded:{RECORDING}",
        OPTIML_DEBUG="true",
        DJANGO_SETTINGS_MODULE="optiml_web.settings",
        PYTHONUNBUFFERED="1",
    )
    return env


def _manage(env: dict[str, str], *args: str) -> str:
    finished = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=180
    )
    assert finished.returncode == 0, f"manage.py {' '.join(args)}:\n{finished.stdout}\n{finished.stderr}"
    return finished.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited ({process.returncode}):\n{log.read_text()}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise AssertionError(f"the server did not listen on {port} within {timeout_s} s:\n{log.read_text()}")


@pytest.fixture
def server(app_env: dict[str, str], tmp_path: Path):
    _manage(app_env, "migrate", "--noinput")
    _manage(
        app_env,
        "shell",
        "-c",
        "from django.contrib.auth.models import User\n"
        f"User.objects.create_user({USER!r}, password={PASSWORD!r})",
    )
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
            cwd=REPO,
            env=app_env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for_port(port, process, log)
        yield f"http://127.0.0.1:{port}", log
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _drive(env: dict[str, str], run_id: int, out) -> subprocess.Popen:
    """Step the run in another process, as a worker would, pausing between steps. A
    paused run is waited on (the page resumes it); a finished or stopped one ends this."""
    code = (
        "import time\n"
        "from search import services\n"
        f"while services.run_step(run_id={run_id}).status in ('running', 'paused'):\n"
        f"    time.sleep({STEP_PAUSE_S})\n"
    )
    return subprocess.Popen(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=REPO,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def _lines(process: subprocess.Popen) -> queue.Queue:
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def test_a_person_starts_a_run_watches_it_grow_inspects_a_node_and_shares_it(server, app_env, tmp_path):
    base_url, server_log = server
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser = subprocess.Popen(
        ["node", str(SCRIPT)],
        cwd=REPO,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={
            **os.environ,
            "BASE_URL": base_url,
            "E2E_USER": USER,
            "E2E_PASSWORD": PASSWORD,
            "SHOTS_DIR": str(SHOTS),
            "CHROMIUM": str(CHROMIUM),
        },
    )
    driver = None
    driver_log = tmp_path / "driver.log"
    driver_out = driver_log.open("w")
    transcript: list[str] = []
    result = None
    lines = _lines(browser)
    deadline = time.monotonic() + SCRIPT_TIMEOUT_S
    try:
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            transcript.append(line)
            if line.startswith("RUN_CREATED "):
                driver = _drive(app_env, int(line.split()[1]), driver_out)
            elif line.startswith("RESULT "):
                result = json.loads(line[len("RESULT ") :])
        browser.wait(timeout=30)
    finally:
        if browser.poll() is None:
            browser.kill()
        if driver is not None:
            try:
                driver.wait(timeout=60)
            except subprocess.TimeoutExpired:  # a run left paused by a failed script
                driver.kill()
                driver.wait()
        driver_out.close()
    story = "\n".join(transcript)
    assert browser.returncode == 0 and result is not None, (
        f"the browser script failed:\n{story}\n--- server log ---\n{server_log.read_text()[-4000:]}"
    )
    assert driver is not None and driver.returncode == 0, driver_log.read_text()
    print("the browser saw:", json.dumps(result, indent=1))  # shown by pytest -s or on failure

    # The form: a bad plan was caught in the browser, the server's refusal shown by its
    # field, and nothing typed was lost either time.
    assert result["highlighted_tokens"] > 0 and result["upload_filled_source"] is True
    assert "Not valid JSON" in result["client_error"]
    assert result["server_error_field"] == "budget" and "10000" in result["server_error"]
    assert result["kept_after_errors"] is True
    # Live: the tree grew while the page was open (several distinct sizes seen), and the
    # progress reached the evaluations the run made.
    sizes = result["node_counts_seen"]
    assert len(sizes) >= 3 and sizes == sorted(sizes), sizes
    assert result["final_status"] == "finished"
    # Pause held the tree still while the search was driven; resume let it go on.
    assert result["paused_badge"] == "paused" and result["grew_while_paused"] is False
    assert result["resumed_badge"] in {"running", "finished"}
    assert result["evaluated"] >= 2
    # The run asked for two evaluations at a time, and says how it ended, in the header and
    # in the runs list: what it found and that the budget was spent.
    assert result["run_parallel"] == 2
    assert result["header_outcome"] == "improved" and result["header_badge"] == "finished"
    assert result["header_message"].startswith("best: node #") and "budget spent" in result["header_message"]
    assert result["listed_message"] == result["header_message"]
    # The inspector: a child's diff against its parent, deltas, and the root's evidence.
    assert result["child_diff_added"] > 0 and result["child_diff_removed"] > 0
    assert "relu" in result["child_diff_text"]
    assert result["root_deltas_text"]
    # Node 1 is the float4 rewrite, measured at 0.507 ms against the root's 0.806 ms.
    assert "float4" in result["child_title"], result["child_title"]
    # Each delta by its name, with the parent's value and this node's (issue 35, item 8).
    assert re.search(r"Time \(median\)80\d\.\d µs → 50\d\.\d µs", result["child_deltas_text"]), \
        result["child_deltas_text"]
    assert "%" in result["child_deltas_text"]
    assert result["root_correctness_rows"] > 0
    assert result["root_has_roofline"] is True
    # Its timed runs: 30, 1 verified (recorded before the gate verified 8), the floor's
    # reason, and the host's references (recorded before the gate said where they were).
    assert "timed runs30" in result["root_timing_text"] and "verified1" in result["root_timing_text"]
    assert "Physics floor: 2.15 GB at" in result["root_timing_text"]
    assert "References of the verified runs: host." in result["root_timing_text"]
    assert result["ncu_sections"][:2] == ["GPU Speed Of Light Throughput", "Memory Workload Analysis"]
    assert result["table_rows"] == result["final_node_count"]
    assert result["searched_ids"] and all(i.startswith("1") for i in result["searched_ids"])
    assert result["table_selects"] == 1
    measured = [t for t in result["sorted_times"] if t != "—"]
    assert measured and result["sorted_times"][: len(measured)] == measured  # unmeasured last
    assert [r.split(" ")[0] for r in result["chart_references"]] == ["vendor", "physics"]
    assert "log scale" in result["chart_axis"]
    # Sharing: the link opened signed out shows the same tree, read-only.
    assert result["share_url"].startswith(base_url + "/share/")
    assert result["shared_node_count"] == result["final_node_count"]
    assert result["shared_controls"] == 0
    assert result["shared_inspector_title"]
    assert result["signed_out_runs_redirects_to_login"] is True
    # Export and import: the runs list took the exported file and opened the new run.
    assert result["runs_listed"] == 1
    assert result["imported_node_count"] == result["final_node_count"]
    assert "read-only" in result["imported_notice"] and result["imported_badge"] == 1
    assert "complete (imported)" in result["imported_progress"] and "/" not in result["imported_progress"]
    assert result["imported_intent"] == "Intent: relu over 2^28 floats"
    assert result["imported_controls"] == 0 and result["imported_share_url"].startswith(base_url + "/share/")
    # the run and its import side by side: the same best path, the same best kernel
    assert result["compare_sides"] == 2 and result["compare_paths"][0] == result["compare_paths"][1]
    assert result["compare_paths"][0][0] == "#0" and len(result["compare_paths"][0]) >= 2
    assert result["compare_same"] == ["The two best kernels are the same."]
    assert result["page_errors"] == []
    for name in (
        "runs",
        "new-run-errors",
        "run-live",
        "run-finished",
        "inspector-child",
        "inspector-root",
        "shared",
    ):
        assert (SHOTS / f"{name}.png").stat().st_size > 10_000, name


DEFINE_SCRIPT = Path(__file__).with_name("define_task.mjs")


def _browse(script: Path, base_url: str, server_log: Path, **extra_env: str) -> dict:
    """Run one browser half (a .mjs beside this file) against the server; what it saw."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    finished = subprocess.run(
        ["node", str(script)], cwd=REPO, text=True, capture_output=True, timeout=SCRIPT_TIMEOUT_S,
        env={**os.environ, "BASE_URL": base_url, "E2E_USER": USER, "E2E_PASSWORD": PASSWORD,
             "SHOTS_DIR": str(SHOTS), "CHROMIUM": str(CHROMIUM), **extra_env},
    )
    lines = [line for line in finished.stdout.splitlines() if line.startswith("RESULT ")]
    assert finished.returncode == 0 and lines, (
        f"{finished.stdout}\n{finished.stderr}\n--- server log ---\n{server_log.read_text()[-4000:]}")
    return json.loads(lines[-1][len("RESULT "):])


def test_a_person_defines_a_task_and_starts_a_run_on_it(server, app_env, tmp_path):
    result = _browse(DEFINE_SCRIPT, *server)

    # The refused reference was shown on its own row, and nothing typed was lost.
    assert "is not allowed" in result["refused_reference"], result
    assert result["refused_reference"].startswith("reference.y:")
    assert result["kept_after_refusal"] is True
    # Created, picked, and its starting plan filled in; the run was made on it.
    # Named for its owner (user-<slug>.<id>), so that declaring tells nothing of others' tasks.
    task = result["selected_task"]
    assert re.fullmatch(r"user-double-relu\.[0-9]+", task) and result["refusal_cleared"] is True
    assert result["plan"]["launches"][0]["kernel"] == "double_relu"
    assert result["page_errors"] == []
    stored = _manage(app_env, "shell", "-c", (
        "from search.models import Run\n"
        f"run = Run.objects.get(pk={result['run_id']})\n"
        "print(run.task.name, run.budget, 'double_relu' in run.root_candidate.source)"))
    assert stored.splitlines()[-1].split() == [task, "1", "True"]
    written = json.loads((tmp_path / "var" / "tasks" / f"{task}.json").read_text())
    assert written["reference"] == {"y": "np.maximum(x, 0) * 2"}
    assert written["tolerances"] == {"float32": {"atol": 0.0, "rtol": 0.0}}
    assert (SHOTS / "define-task-errors.png").stat().st_size > 10_000


DRAFT_SCRIPT = Path(__file__).with_name("draft_kernel.mjs")
@pytest.fixture
def llm_app_env(app_env):
    """The app's LLM settings point at a scripted OpenAI-compatible server on 127.0.0.1."""
    from tests.search.scripted_llm import ScriptedLLM

    llm = ScriptedLLM()
    llm.start()
    app_env.update(OPTIML_LLM_BASE_URL=llm.base_url, OPTIML_LLM_MODEL="scripted-7b",
                   OPTIML_LLM_API_KEY="sk-test", OPTIML_LLM_MAX_RETRIES="0", OPTIML_LLM_TIMEOUT_S="10")
    try:
        yield llm
    finally:
        llm.stop()


def test_a_person_has_the_llm_write_the_kernel_from_an_intent(llm_app_env, server, tmp_path):
    """...and starts a run from it, edited by hand: the session's tree begins with the
    intent and the attempt nvcc refused, before the root (the repair); clicking it shows
    where it stopped; the last attempt shows the edit."""
    from tests.search.scripted_llm import WRITTEN_RELU, http_error, reply, written_relu

    broken = WRITTEN_RELU.replace("fmaxf(x[i], 0.0f);", "fmaxf(x[i], 0.0f)")  # nvcc wants its ";"
    llm_app_env.script(http_error(401, "bad key"), reply(written_relu(broken)), reply(written_relu()))
    result = _browse(DRAFT_SCRIPT, *server)

    assert "could not write a kernel" in result["refusal"] and result["kept"] is True
    assert result["drafted"].startswith("Written by llm:scripted-7b: grid-stride relu")
    assert result["source"].strip() == WRITTEN_RELU.strip() and result["errors_cleared"] is True
    assert result["plan"]["launches"][0]["kernel"] == "relu_grid"
    assert result["page_errors"] == []
    assert "relu over 2^28 floats" in llm_app_env.prompts()[1]
    assert "expected a \";\"" in llm_app_env.prompts()[-1]  # the repair was fed nvcc's words
    # The run from it: the intent and the refused attempt, left of the root, in that order.
    assert result["chain_labels"] == ["intent", "#a1 llm:scripted-7b: compile failed"], result
    assert result["chain_before_root"] is True and result["failed_colour"] == "rgb(214, 69, 69)"
    assert result["attempt_header"].startswith("#a1 written from the intent")
    assert result["attempt_stage"] == "compile"
    assert "expected a" in result["attempt_message"] and "seed" not in result["attempt_message"]
    assert result["legend_has_attempts"] is True
    # Edited by hand before the run: the run names its writing job, so the attempts stay,
    # and the last one says what was changed.
    assert result["edited_notice"].startswith("Edited by hand before the search started")
    assert result["edited_added"] == ["// tuned by hand"], result
    assert (SHOTS / "generation-nodes.png").stat().st_size > 10_000


SKILLS_SCRIPT = Path(__file__).with_name("skills.mjs")
MEMBER, MEMBER_PASSWORD = "bob", "bobs-own-secret-1"
# A card as the lineage app stores one, with a real step's diff (relu's float4 loads).
STORED_CARD = """
from django.contrib.auth.models import User
from lineage.models import SkillCard
User.objects.filter(username="ada").update(is_staff=True)
User.objects.create_user("bob", password="bobs-own-secret-1")
diff = ("--- before.cu\\n+++ after.cu\\n@@ -1,3 +1,4 @@\\n int i = blockIdx.x * blockDim.x + threadIdx.x;\\n"
        "-if (i < n) y[i] = fmaxf(x[i], 0.0f);\\n+float4 v = reinterpret_cast<const float4*>(x)[i];\\n"
        "+reinterpret_cast<float4*>(y)[i] = make_float4(fmaxf(v.x, 0.f), fmaxf(v.y, 0.f),\\n"
        "+                                              fmaxf(v.z, 0.f), fmaxf(v.w, 0.f));\\n")
SkillCard.objects.create(card_id="vec4-v1", intent="VEC4", status="verified", data={
    "id": "vec4-v1", "intent": "VEC4", "sentence": "load and store four floats at a time",
    "anchor": {"rewrites": [{"before": "float * ?0", "after": "float4 * ?0", "tasks": ["relu", "softmax"],
                             "generalised": True}], "steps": []},
    "vector": [{"task": "relu", "before": "", "after": "OPT_VEC4", "speedup": 1.52, "source_diff": diff}],
    "preconditions": {"order": {"required": {"GRID_STRIDE": ["relu"]}}},
    "effects": {"speedup": {"n": 90, "min": 0.69, "median": 1.16, "max": 2.62}},
    "risks": [{"kind": "refused", "task": "relu", "message": "misaligned for N % 4 != 0",
               "state": "OPT_GRID_STRIDE,OPT_VEC4"}],
    "scope": {"tasks": ["relu", "softmax"], "arch": "sm_90"},
    "evidence": {"lineages": 10, "transitions": 90, "helped": 84, "neutral": 2, "hurt": 4},
    "roundtrip": {"status": "verified", "trials": [{"kind": "own"}]}})
import json, pathlib
from lineage import services
from lineage.engine.walker import Lineage
recorded = sorted(pathlib.Path("bench/results").glob("*-h200-lineages*/lineage-relu.json"))[-1]
stored = services.lineage_store(lineage=Lineage.from_dict(json.loads(recorded.read_text())), origin="import")
SkillCard.objects.get(card_id="vec4-v1").lineages.add(stored)
print("LINEAGE", stored.pk, recorded)
"""


def test_a_reviewer_approves_a_card_with_a_comment_and_a_member_sees_it_with_its_history(server, app_env):
    from lineage.engine.graph import lineage_rows
    from lineage.engine.walker import Lineage

    lineage_id, recorded = _manage(app_env, "shell", "-c", STORED_CARD).split("LINEAGE ")[-1].split()
    result = _browse(SKILLS_SCRIPT, *server, E2E_MEMBER=MEMBER, E2E_MEMBER_PASSWORD=MEMBER_PASSWORD)

    assert result["library_rows"] == ["VEC4"] and result["side_by_side"] is True, result
    assert result["holes"] == ["?0", "?0"]
    # The reviewer approved it with a comment; the status changed on the page.
    assert result["status_after_review"] == "approved"
    # The edit is a second version whose diff shows the new notes.
    assert result["versions"] == 2 and "needs N % 4 == 0" in result["version_diff"]
    # Another member, signed in apart, sees it approved, with the review and its comment,
    # and is offered no review.
    assert result["member_status"] == "approved"
    assert "ada approved" in result["member_review"]
    assert "float4 pays on row kernels" in result["member_review"]
    assert result["member_can_review"] is False and result["page_errors"] == []
    stored = _manage(app_env, "shell", "-c", (
        "from lineage.models import SkillCard\n"
        "card = SkillCard.objects.get(card_id='vec4-v1')\n"
        "print(card.status, card.reviews.count(), card.versions.count(), card.data['notes'])"))
    assert stored.splitlines()[-1] == "approved 1 2 needs N % 4 == 0"
    # The card's lineage page draws the walk, its highlighted path the recorded one, from
    # the plain attempt to the expert (relu: every flag on).
    walk = Lineage.from_dict(json.loads((REPO / recorded).read_text()))
    expected = lineage_rows(walk, "OPT_GRID_STRIDE,OPT_LAUNCH_BOUNDS,OPT_RESTRICT,OPT_UNROLL,OPT_VEC4")
    assert result["lineage_url"].endswith(f"/lineages/{lineage_id}/")
    assert result["lineage_nodes"] == len(expected["rows"])
    assert result["lineage_highlighted"] == expected["path"] == result["lineage_path"]
    rows = {row["id"]: row for row in expected["rows"]}
    assert result["lineage_step_title"] == rows[expected["path"][1]]["title"]  # the step into it
    # The card's risk links to the state where its attempt was made: the page opens there.
    assert result["risk_opened_state"] == "OPT_GRID_STRIDE,OPT_VEC4"
    for name in ("skills-library", "skill-card-approved", "skill-card-member", "lineage"):
        assert (SHOTS / f"{name}.png").stat().st_size > 10_000, name


TEAM_SKILLS_SCRIPT = Path(__file__).with_name("skills_team.mjs")
TEAM_LIBRARY = """
from django.contrib.auth.models import User
from accounts import services as accounts
from lineage.models import SkillCard
from profiling.harness import tasks
from search import services as search
from search.models import Run, RunNode
ada, bob = User.objects.get(username="ada"), User.objects.get(username="bob")
team = accounts.team_create(name="kernels", admin=ada)
accounts.membership_set(team=team, user=bob)
vec4 = SkillCard.objects.get(card_id="vec4-v1")
SkillCard.objects.create(card_id="fast_math-v1", intent="FAST_MATH", status="induced",
                         data={**vec4.data, "id": "fast_math-v1", "intent": "FAST_MATH",
                               "sentence": "fast math"})
relu = tasks.get("relu")
run = search.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan, budget=3, user=ada,
                        team=team, intent="the team's relu")
Run.objects.filter(pk=run.pk).update(status="finished")
root = RunNode.objects.get(run=run, node_id=0)
RunNode.objects.filter(pk=root.pk).update(state="done", status="passed", level="full", time_ms=0.8)
RunNode.objects.create(run=run, node_id=1, parent_id=0, candidate=root.candidate, state="done",
                       engine={**root.engine, "id": 1, "parent": 0, "depth": 1, "created": 1},
                       source="skill:vec4-v1", title="VEC4: relu's step", status="passed", level="full",
                       time_ms=0.4, detail={"params": {"card": "vec4-v1", "card_version": {
                           "library": f"team:{team.pk}", "version": 1, "status": "approved"}}})
print("TEAM", team.pk, "RUN", run.pk)
"""


def test_a_team_copies_the_library_reviews_its_own_card_follows_a_node_to_it_and_sees_a_roundtrip_live(
        server, app_env, tmp_path):
    _manage(app_env, "shell", "-c", STORED_CARD)
    team, run = _manage(app_env, "shell", "-c", TEAM_LIBRARY).split("TEAM ")[-1].split(" RUN ")
    admission = tmp_path / "admission.json"
    admission.write_text(json.dumps({"source": "e2e", "cards": {"fast_math-v1": {"status": "verified",
                                                                                 "trials": []}}}))
    result = _browse(TEAM_SKILLS_SCRIPT, *server, E2E_MEMBER=MEMBER, E2E_MEMBER_PASSWORD=MEMBER_PASSWORD,
                     E2E_TEAM=team.strip(), E2E_RUN=run.strip(), E2E_PYTHON=sys.executable,
                     E2E_REPO=str(REPO), E2E_APP_ENV=json.dumps(app_env), E2E_ADMISSION=str(admission))
    assert "its runs use the default library" in result["empty_notice"], result
    assert result["copy_message"].startswith("Copied 2 cards from the default library")
    assert sorted(result["team_rows"]) == ["FAST_MATH", "VEC4"]
    assert result["library_url"].endswith(f"?team={team.strip()}")
    # The copy keeps what the roundtrip found (verified), not the project's review; the
    # team's admin approves the team's copy, and the default card stays as it was.
    assert result["team_card_status"] == "verified" and result["team_card_after"] == "approved"
    assert result["team_card_library"] == "kernels's library" and result["copied_from"] == "/skills/vec4-v1/"
    assert result["effect_points"] >= 1  # the relu lineage's VEC4 steps
    stored = _manage(app_env, "shell", "-c", (
        "from lineage.models import SkillCard\n"
        "print(*[f'{c.team_id or 0}:{c.status}' for c in SkillCard.objects.filter(card_id='vec4-v1')"
        ".order_by('team_id')])"))
    assert sorted(stored.split()[-2:]) == sorted(["0:verified", f"{team.strip()}:approved"])
    # The node the card made links to the team's card, and the card's usage links back.
    assert result["node_card_link"] == f"/skills/vec4-v1/?team={team.strip()}"
    assert result["usage_rows"] == 1 and result["back_at"] == f"/runs/{run.strip()}/"
    # The admission landed from another process; the member's page showed it, unreloaded.
    assert (result["live_before"], result["live_after"]) == ("induced", "verified")
    assert "roundtrip finished" in result["live_notice"] and result["member_reloaded"] == 1
    assert result["live_seconds"] < 30 and result["page_errors"] == []
    for name in ("skills-team-library", "skill-card-team", "skill-card-live"):
        assert (SHOTS / f"{name}.png").stat().st_size > 10_000, name


TEAMS_SCRIPT = Path(__file__).with_name("teams.mjs")


def test_a_person_makes_a_team_and_a_colleague_sees_their_role(server, app_env):
    _manage(app_env, "shell", "-c", f"from django.contrib.auth.models import User\n"
                                    f"User.objects.create_user('{MEMBER}', password='{MEMBER_PASSWORD}')")
    result = _browse(TEAMS_SCRIPT, *server, E2E_MEMBER=MEMBER, E2E_MEMBER_PASSWORD=MEMBER_PASSWORD,
                     E2E_NEWCOMER="grace", E2E_NEWCOMER_PASSWORD="compiler-1952")

    assert "in no team yet" in result["empty"]
    # A stranger's name is refused as a name nobody has: the form tells no one who exists.
    assert "nobody called 'nobody-here' is in a team with you" in result["refusal"]
    assert result["stranger_refusal"].replace(MEMBER, "X") == result["refusal"].replace("nobody-here", "X")
    assert any(row.startswith(MEMBER) for row in result["owner_rows"]), result["owner_rows"]
    assert result["member_badge"] == "you: admin" and result["page_errors"] == []
    stored = _manage(app_env, "shell", "-c", (
        "from accounts.models import Membership\n"
        "members = Membership.objects.filter(team__name='attention kernels')\n"
        "print(sorted((m.user.username, m.role) for m in members))"))
    assert stored.splitlines()[-1] == f"[('ada', 'admin'), ('{MEMBER}', 'admin'), ('grace', 'member')]"
    # The invitation: one open link, the newcomer signed up by it onto the first-run page,
    # and the link opens nothing a second time.
    assert result["open_invitations"] == 1 and result["invitation_heading"] == "Join attention kernels"
    assert "Welcome, grace" in result["welcome"] and "You are in attention kernels." in result["welcome"]
    assert result["reused_heading"] == "This invitation cannot be used"
    for name in ("teams", "teams-member", "teams-invitation", "invitation", "welcome"):
        assert (SHOTS / f"{name}.png").stat().st_size > 10_000, name


TREE_LABELS_SCRIPT = Path(__file__).with_name("tree_labels.mjs")
# A finished relu run of 256 nodes, stored as the search stores them: twelve block sizes
# under the root, twenty steps under each, every seventh a float4 rewrite; under #12,
# three float4 rewrites that failed, which the tree folds into the stub "failed:12".
MANY_NODES = """
from django.contrib.auth.models import User
from profiling.harness import tasks
from search import services as search
from search.models import Run, RunNode
relu = tasks.get("relu")
run = search.run_create(task_name="relu", source=relu.naive_source, plan=relu.naive_plan, budget=400,
                        user=User.objects.get(username="ada"))
root = RunNode.objects.get(run=run, node_id=0)
RunNode.objects.filter(pk=root.pk).update(state="done", status="passed", level="full", time_ms=0.806,
                                          visits=256)
rows = []
def node(node_id, parent, source, title, time_ms, status="passed", visits=1):
    rows.append(RunNode(run=run, node_id=node_id, parent_id=parent, candidate=root.candidate, state="done",
                        engine={**root.engine, "id": node_id, "parent": parent}, source=source, title=title,
                        status=status, level="full" if status == "passed" else "", time_ms=time_ms,
                        visits=visits))
for block in range(1, 13):
    node(block, 0, "tunable", f"BLOCK={32 * block}", 0.8 - 0.01 * block, visits=21)
for step in range(240):
    node_id, parent = 13 + step, 1 + step // 20
    vectorized = step % 7 == 0
    node(node_id, parent, "rewrite:vectorize" if vectorized else "rewrite:unroll",
         "float4 loads" if vectorized else f"unroll {2 + step % 5}", 0.3 + (step * 37 % 101) / 200)
for node_id in range(253, 256):
    node(node_id, 12, "rewrite:vectorize", "float4 loads, misaligned", None, status="rejected")
RunNode.objects.bulk_create(rows)
Run.objects.filter(pk=run.pk).update(status="finished", evaluated=256, root_ms=0.806, best_ms=0.3,
                                     best_node=13)
print("RUN", run.pk)
"""
TREE_NODES = 256 - 3 + 1  # the three failed leaves are one stub
VECTORIZED = {str(13 + step) for step in range(240) if step % 7 == 0}
LABEL_MIN_PX = 10  # a label of 11 px (styles.css) a little rounded: readable on screen


def _overlap(a: list[float], b: list[float]) -> float:
    """The area two boxes on screen [left, top, right, bottom] share, in px²."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def test_the_tree_labels_at_fit_do_not_overlap_and_a_search_marks_its_matches_even_folded_ones(
        server, app_env):
    run = _manage(app_env, "shell", "-c", MANY_NODES).split("RUN ")[-1].strip()
    result = _browse(TREE_LABELS_SCRIPT, *server, E2E_RUN=run, E2E_NODES=str(TREE_NODES),
                     E2E_SEARCH="vectorize")
    assert result["tree_nodes"] == TREE_NODES, result["tree_ids"]
    labels = result["fit_labels"]

    # At Fit the tree is zoomed far out, yet its labels are readable and none covers another.
    assert result["fit_scale"] < 0.5, result["fit_scale"]
    # Every mark the tree draws is in its legend.
    for mark in ("passed, faster", "failed", "hollow: screened only", "best path", "dashed: failed, folded",
                 "dark ring: collapsed", "blue ring: search match"):
        assert mark in result["legend"], result["legend"]
    assert len(labels) >= 3, labels  # the root's, the best's and the failed stub's at least
    assert {"0", "13"} <= {label["id"] for label in labels}, labels
    # Its nodes are circles you can see, not lost under a pixel, and its labels stay in the
    # frame (the best, at the right edge, ends at its node instead of running past it).
    assert result["fit_min_radius"] >= 2.0, result["fit_min_radius"]
    left, _, right, _ = result["fit_frame"]
    for label in labels:
        assert left <= label["box"][0] and label["box"][2] <= right, (label, result["fit_frame"])
    for label in labels:
        assert label["box"][3] - label["box"][1] >= LABEL_MIN_PX, label
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            assert _overlap(a["box"], b["box"]) < 1, (a, b)
    # The node under the pointer is labelled, readable, and no longer once the pointer leaves.
    hovered = result["hovered_label"]
    assert hovered is not None and hovered["text"].startswith(f"#{result['hovered_id']} "), result
    assert hovered["box"][3] - hovered["box"][1] >= LABEL_MIN_PX
    assert result["label_after_leaving"] == 0
    # The table's search marks its matches in the tree and dims the rest; the failed stub
    # that hides three of them says so and is not dimmed.
    assert not result["before_search"]["searching"]
    searching = result["searching"]
    assert searching["searching"] and set(searching["match"]) == VECTORIZED, searching
    assert len(searching["unmatched"]) == TREE_NODES - len(VECTORIZED) - 1, len(searching["unmatched"])
    assert searching["unmatched_opacity"] < 0.5
    assert searching["holds_match"] == ["failed:12"] and "failed:12" not in searching["unmatched"]
    assert searching["stubs"]["failed:12"] == "3 failed · 3 matches"
    shown = {label["id"] for label in result["search_labels"]}
    assert "failed:12" in shown and len(shown & VECTORIZED) >= 3, result["search_labels"]
    # Cleared, the tree is as it was.
    cleared = result["cleared"]
    assert not cleared["searching"]
    assert cleared["match"] == cleared["unmatched"] == cleared["holds_match"] == []
    assert cleared["stubs"]["failed:12"] == "3 failed"
    assert result["page_errors"] == []
    for name in ("tree-labels-fit", "tree-search"):
        assert (SHOTS / f"{name}.png").stat().st_size > 10_000, name
