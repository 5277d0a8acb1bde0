"""The task registry: every task the gate knows, by name.

A task is a module that defines `TASK = Task(...)`: the modules of this package (those
whose names do not start with "_"), and every `*.py` file in the directories named by
the environment variable OPTIML_TASK_PATH (separated by os.pathsep). The second is how
a user adds a task without touching the harness. The same directories may hold
declared tasks, `<name>.json` files (declared.py): data, no Python, so that tasks
defined in the browser are known by name on any host that has the files.

Modules load on first use and are cached. Declared tasks are looked at again when a
name is not found and by `all_tasks()` (each file parsed once per change), so a task
declared after this process started is found without a restart. `_reset_for_tests()`
forgets everything.

A task's custom `compare` is called as compare(outputs, expected, inputs, sizes):
the kernel's outputs, the reference's, the inputs both were computed from, and the
sizes. It returns None when the outputs are acceptable, a Mismatch otherwise.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import pkgutil
import sys
import threading
from pathlib import Path
from types import ModuleType

from .. import declared
from ..spec import Task

TASK_PATH_VARIABLE = "OPTIML_TASK_PATH"


class UnknownTask(KeyError):
    """No task has this name; the message lists those that exist."""

    def __str__(self) -> str:  # KeyError would print the message quoted, as a repr
        return str(self.args[0])


class TaskDefinitionError(ValueError):
    """A task module is broken: a duplicate name, a TASK that is not a Task, a bad path."""


_lock = threading.Lock()
_loading = threading.local()  # set while this thread discovers tasks (under _lock)
_modules: dict[str, tuple[Task, str]] | None = None  # name -> (task, file it came from)
_declared: dict[Path, tuple[tuple[int, int], Task]] = {}  # file -> (its mtime and size, task)
_tasks: dict[str, Task] | None = None


def get(name: str) -> Task:
    tasks = _load()
    if name not in tasks:
        tasks = _load(rescan=True)  # declared since we last looked?
    if name not in tasks:
        raise UnknownTask(f"unknown task {name!r}; known tasks: {', '.join(sorted(tasks))}")
    return tasks[name]


def all_tasks() -> list[Task]:
    tasks = _load(rescan=True)
    return [tasks[name] for name in sorted(tasks)]


def add_directory(directory: str | Path) -> None:
    """Put `directory` on OPTIML_TASK_PATH in this process's environment, so that this
    process and every gate subprocess it starts (they inherit the environment) see its
    tasks. The Django apps call this at start-up with settings.OPTIML_TASK_DIR."""
    global _modules, _tasks
    entries = [e for e in os.environ.get(TASK_PATH_VARIABLE, "").split(os.pathsep) if e]
    if str(directory) not in entries:
        os.environ[TASK_PATH_VARIABLE] = os.pathsep.join([*entries, str(directory)])
        with _lock:
            _modules, _tasks = None, None


def _reset_for_tests() -> None:
    """Forget the loaded tasks, so the next call discovers them again."""
    global _modules, _tasks
    with _lock:
        _modules, _tasks = None, None
        _declared.clear()


def _load(*, rescan: bool = False) -> dict[str, Task]:
    global _modules, _tasks
    if getattr(_loading, "active", False):  # a task module asked while being imported: under _lock
        raise TaskDefinitionError("a task module asks the registry for tasks while the registry imports it; "
                                  "take what it needs from the other module directly")
    with _lock:
        _loading.active = True
        try:
            if _modules is None:
                _modules = _discover_modules()
            if _tasks is None or rescan:
                _tasks = _with_declared(_modules)
            return _tasks
        finally:
            _loading.active = False


def _discover_modules() -> dict[str, tuple[Task, str]]:
    found: dict[str, tuple[Task, str]] = {}
    for info in pkgutil.iter_modules(__path__):
        if not info.name.startswith("_"):
            module = importlib.import_module(f"{__name__}.{info.name}")
            _add(found, module, str(module.__file__))
    for directory in _user_directories():
        for path in sorted(directory.glob("*.py")):
            _add(found, _import_file(path), str(path))
    for name, (_, origin) in found.items():
        if declared.is_declared_name(name):
            raise TaskDefinitionError(f"{origin}: the prefix {declared.NAME_PREFIX!r} of {name!r} is "
                                      "kept for tasks declared as JSON")
    return found


def _with_declared(modules: dict[str, tuple[Task, str]]) -> dict[str, Task]:
    found = dict(modules)
    seen = set()
    for directory in _user_directories():
        for path in sorted(directory.glob("*.json")):
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue  # removed since the listing
            seen.add(path)
            key = (stat.st_mtime_ns, stat.st_size)
            if path not in _declared or _declared[path][0] != key:
                try:
                    _declared[path] = (key, declared.load_file(path))
                except declared.DefinitionError as error:
                    raise TaskDefinitionError(f"{path}: {error}") from None
            task = _declared[path][1]
            if task.name in found:
                other = found[task.name][1]
                raise TaskDefinitionError(f"two tasks are named {task.name!r}: {other} and {path}")
            found[task.name] = (task, str(path))
    for path in set(_declared) - seen:  # a file that was removed
        del _declared[path]
    return {name: task for name, (task, _) in found.items()}


def _user_directories() -> list[Path]:
    directories = []
    for entry in os.environ.get(TASK_PATH_VARIABLE, "").split(os.pathsep):
        if not entry:
            continue  # an empty entry (a trailing separator, say) names nothing
        directory = Path(entry).expanduser()
        if not directory.is_dir():
            raise TaskDefinitionError(f"{TASK_PATH_VARIABLE} names {entry!r}, which is not a directory")
        directories.append(directory)
    return directories


def _import_file(path: Path) -> ModuleType:
    # A name unique to the file's full path, so that two directories may both hold
    # "softmax.py" without one module replacing the other in sys.modules.
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    name = f"optiml_user_task_{path.stem}_{digest}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise TaskDefinitionError(f"cannot import task file {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses defined in the file look themselves up here
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _add(found: dict[str, tuple[Task, str]], module: ModuleType, origin: str) -> None:
    task = getattr(module, "TASK", None)
    if task is None:
        return  # a helper module, not a task
    if not isinstance(task, Task):
        raise TaskDefinitionError(f"{origin}: TASK is a {type(task).__name__}, not a Task")
    if task.name in found:
        raise TaskDefinitionError(f"two tasks are named {task.name!r}: {found[task.name][1]} and {origin}")
    found[task.name] = (task, origin)
