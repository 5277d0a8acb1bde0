"""The app starts, and searches with the rule judge, on a host without the `openai`
package (a bare GPU host carries only what it needs): the LLM's module is imported only
when an LLM judge or expert is asked for."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

PROGRAM = """
import sys

class NoOpenAI:
    def find_spec(self, name, path=None, target=None):
        if name == "openai" or name.startswith("openai."):
            raise ImportError("openai is not installed on this host")

sys.meta_path.insert(0, NoOpenAI())
import django
django.setup()
from django.core.management import call_command
call_command("check")
call_command("migrate", "--noinput", verbosity=0)
import optiml_web.asgi, optiml_web.urls  # every route and websocket route
from search import services
rules, _ = services.judges_for("rules")
try:
    services.judges_for("llm")
except ImportError as error:
    print("LLM", error)
assert "openai" not in sys.modules
print("STARTED", rules.name)
"""


def test_the_app_starts_and_takes_the_rule_judge_without_openai(tmp_path):
    dropped = {"DATABASE_URL", "DATABASE_URL_FILE", "REDIS_URL", "REDIS_URL_FILE"}
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update(DJANGO_SETTINGS_MODULE="optiml_web.settings", OPTIML_VAR_DIR=str(tmp_path / "var"))
    done = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "STARTED rules" in done.stdout
    assert "LLM openai is not installed" in done.stdout  # asked for, it says what is missing
