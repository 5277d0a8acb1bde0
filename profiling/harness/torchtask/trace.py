"""The module's forward as a graph of operations (torch.fx), read in a sandboxed child.

    python -m profiling.harness.torchtask.trace REQUEST.json FD

The module is the user's code: it runs here, never in the web or search process, as
probe.py does. The child instantiates `Model(*get_init_inputs())` at the request's
sizes (small ones), traces it with `torch.fx.symbolic_trace`, runs the traced graph on
`get_inputs()` once to learn each value's shape (`ShapeProp`), and sends one message:

    {"type": "graph", "ok": true, "nodes": [{"name", "op", "target", "module", "args",
     "kwargs", "shape", "attributes"}, ...]}

`target` is the function's or method's name (`relu`, `add`), or the module's class
(`LeakyReLU`) with its public scalar attributes (`negative_slope`); an argument is
{"node": name} or a number, bool, string or None. What cannot be traced (data-dependent
control flow, calls fx does not follow) is `ok: false` with the error.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

TRACE_LIMIT_S = 60
_SCALARS = (int, float, bool, str, type(None))


def _argument(value):
    import torch.fx

    if isinstance(value, torch.fx.Node):
        return {"node": value.name}
    if isinstance(value, _SCALARS):
        return value if not isinstance(value, float) or value == value else "nan"
    if isinstance(value, tuple | list):
        return [_argument(v) for v in value]
    return {"unsupported": type(value).__name__}


def _target(node, modules) -> tuple[str, str, dict]:
    """(name, where it comes from, the module's scalar attributes)."""
    if node.op == "call_module":
        module = modules[node.target]
        attributes = {k: list(v) if isinstance(v, tuple) else v for k, v in vars(module).items()
                      if not k.startswith("_") and k != "training" and (isinstance(v, _SCALARS) or (
                          isinstance(v, tuple) and all(isinstance(e, _SCALARS) for e in v)))}
        attributes["parameters"] = [name for name, _ in module.named_parameters(recurse=False)]
        return type(module).__name__, type(module).__module__, attributes
    if node.op == "call_function":
        name = getattr(node.target, "__name__", str(node.target))
        return name, getattr(node.target, "__module__", "") or "", {}
    return str(node.target), "", {}


def trace(torch, source: str) -> dict:
    from torch.fx.passes.shape_prop import ShapeProp

    namespace = {"__name__": "kernelbench_problem"}
    torch.manual_seed(0)
    exec(compile(source, "<module>", "exec"), namespace)  # noqa: S102  (in this sandboxed child)
    for name in ("Model", "get_inputs", "get_init_inputs"):
        if name not in namespace:
            return {"ok": False, "error": f"the module defines no {name}"}
    model = namespace["Model"](*namespace["get_init_inputs"]())
    graph = torch.fx.symbolic_trace(model)
    ShapeProp(graph).propagate(*namespace["get_inputs"]())
    modules = dict(graph.named_modules())
    nodes = []
    for node in graph.graph.nodes:
        meta = node.meta.get("tensor_meta")
        target, where, attributes = _target(node, modules)
        nodes.append({"name": node.name, "op": node.op, "target": target, "module": where,
                      "args": [_argument(a) for a in node.args],
                      "kwargs": {k: _argument(v) for k, v in node.kwargs.items()},
                      "shape": list(meta.shape) if hasattr(meta, "shape") else None,
                      "dtype": str(meta.dtype).replace("torch.", "") if hasattr(meta, "dtype") else None,
                      "attributes": attributes})
    return {"ok": True, "nodes": nodes}


def read_graph(source: str, workdir: Path) -> dict:
    """The graph message of a child that traced `source` (a module at small sizes), or
    {"ok": False, "error": ...} when it did not answer."""
    from profiling.harness import sandbox

    workdir.mkdir(parents=True, exist_ok=True)
    request = workdir / "trace-request.json"
    request.write_text(json.dumps({"source": source}))
    root = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    result = sandbox.run_isolated([sys.executable, "-m", "profiling.harness.torchtask.trace", str(request)],
                                  time_limit_s=TRACE_LIMIT_S + 30, log_path=workdir / "trace.log", env=env)
    found = next((m for m in result.messages if m.get("type") == "graph"), None)
    if found is None:
        why = "timed out" if result.timed_out else (result.log_tail.strip().splitlines() or ["died"])[-1]
        return {"ok": False, "error": f"the tracing child did not answer: {why}"}
    return found


def _alarm(signum, frame):  # noqa: ARG001
    raise TimeoutError(f"tracing took over {TRACE_LIMIT_S} s")


def main(argv: list[str]) -> int:
    from profiling.harness.sandbox import Channel

    with open(argv[1]) as file:
        request = json.loads(file.read())
    channel = Channel(int(argv[2]))
    import torch

    torch.set_num_threads(1)
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TRACE_LIMIT_S)
    try:
        found = trace(torch, request["source"])
    except BaseException as error:  # noqa: BLE001  (the module's own failure is the answer)
        from .probe import module_failure

        found = {"ok": False, "error": module_failure(error)}
    finally:
        signal.alarm(0)
    channel.send("graph", **found)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
