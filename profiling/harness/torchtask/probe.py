"""The child that runs KernelBench modules: untrusted code, in its own process
(sandbox.run_isolated), answering on the result channel.

    python -m profiling.harness.torchtask.probe REQUEST.json FD

For each run of the request (a module's source at some sizes, a device, a seed) it
executes the source in a fresh namespace, builds `Model(*get_init_inputs())`, calls it on
`get_inputs()` and sends what it saw: each input's kind, shape and dtype (with the value
range of integer tensors, on the CPU), each output's shape and dtype, or the error. On
the meta device nothing is allocated, so a problem's own sizes cost nothing; on the CPU
the forward runs twice under different random seeds, and outputs that differ mean
randomness inside forward. Each run has its own time limit.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import traceback

RUN_LIMIT_S = int(os.environ.get("OPTIML_PROBE_RUN_S", "30"))  # each run's own limit
# A CPU run is a small one: inputs and parameters of at most this many elements, counted
# first on the meta device (a problem whose sizes are numbers in get_inputs, not
# constants, would otherwise run at its full size on the CPU).
SMALL_ELEMENTS = 1 << 22


class RunTimeout(Exception):
    pass


def _alarm(signum, frame):  # noqa: ARG001
    raise RunTimeout(f"ran past {RUN_LIMIT_S} s")


def describe(value, torch, on_cpu: bool, bounds: list | None = None) -> dict:
    if isinstance(value, torch.Tensor):
        dtype = str(value.dtype).removeprefix("torch.")
        found = {"kind": "tensor", "shape": list(value.shape), "dtype": dtype}
        if on_cpu and not value.is_floating_point() and value.numel() and value.dtype != torch.bool:
            found["range"] = [int(value.min()), int(value.max())]
        if on_cpu and value.is_floating_point() and value.numel() and bool(torch.isfinite(value).all()):
            found["range"] = [float(value.min()), float(value.max())]
        bound = next(((low, high) for t, low, high in bounds or () if t is value), None)
        if bound is not None:
            found["bounds"] = list(bound)
        return found
    if isinstance(value, bool | int | float):
        return {"kind": type(value).__name__, "value": value}
    return {"kind": type(value).__name__}


def _elements(torch, namespace: dict) -> int:
    with torch.device("meta"):
        model = namespace["Model"](*list(namespace["get_init_inputs"]()))
        inputs = list(namespace["get_inputs"]())
    return sum(p.numel() for p in model.parameters()) + sum(
        v.numel() for v in inputs if isinstance(v, torch.Tensor))


def _randint_bounds(args: tuple, kwargs: dict) -> tuple[int, int] | None:
    """(low, high) of a torch.randint call: randint(high, size) or randint(low, high, size)."""
    ints = [a for a in args if type(a) is int]
    low, high = (0, ints[0]) if len(ints) == 1 else tuple(ints[:2]) if len(ints) >= 2 else (0, None)
    low, high = kwargs.get("low", low), kwargs.get("high", high)
    return (low, high) if type(low) is int and type(high) is int else None


def _watched_inputs(torch, namespace: dict) -> tuple[list, list]:
    """get_inputs() with torch.randint watched: (its values, [(tensor, low, high)]). A
    TorchFunctionMode, not a replaced torch.randint: torch's device context finds its
    factory functions by identity, and a stand-in would escape it (a meta run allocating
    its inputs for real)."""
    from torch.overrides import TorchFunctionMode

    class Watch(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.seen: list = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            bound = _randint_bounds(args, kwargs or {}) if func is torch.randint else None
            if bound is not None:
                self.seen.append((out, *bound))
            return out

    with Watch() as watch:
        return list(namespace["get_inputs"]()), watch.seen


def run(torch, source: str, device: str, seed: int) -> dict:
    from torch.utils.flop_counter import FlopCounterMode

    namespace = {"__name__": "kernelbench_problem"}
    torch.manual_seed(seed)
    with torch.device(device):
        exec(compile(source, "<module>", "exec"), namespace)  # noqa: S102  (in this sandboxed child)
        for name in ("Model", "get_inputs", "get_init_inputs"):
            if name not in namespace:
                return {"ok": False, "error": f"the module defines no {name}"}
        if device == "cpu" and (count := _elements(torch, namespace)) > SMALL_ELEMENTS:
            return {"ok": False, "error": f"{count} elements at these sizes: not a small run"}
        init = list(namespace["get_init_inputs"]())
        model = namespace["Model"](*init)
        inputs, bounds = _watched_inputs(torch, namespace)
        on_cpu = device == "cpu"
        torch.manual_seed(seed + 1)
        with torch.no_grad():
            with FlopCounterMode(display=False) as counter:
                out = model(*inputs)
            again = None
            if on_cpu:
                torch.manual_seed(seed + 2)
                again = model(*inputs)
    outputs = list(out) if isinstance(out, tuple | list) else [out]
    if not all(isinstance(o, torch.Tensor) for o in outputs):
        return {"ok": False, "error": "forward returns something other than tensors"}
    found = {"ok": True, "init": [describe(v, torch, on_cpu) for v in init],
             "inputs": [describe(v, torch, on_cpu, bounds) for v in inputs],
             "outputs": [describe(o, torch, on_cpu) for o in outputs],
             "parameters": sum(p.numel() for p in model.parameters()),
             "weights": [{**describe(p, torch, False), "name": name} for name, p in model.named_parameters()],
             "flops": int(counter.get_total_flops())}
    if on_cpu:
        repeated = list(again) if isinstance(again, tuple | list) else [again]
        found["deterministic"] = all(torch.equal(a, b) for a, b in zip(outputs, repeated, strict=True))
        found["finite"] = all(bool(torch.isfinite(o).all()) for o in outputs if o.is_floating_point())
    return found


def module_failure(error: BaseException) -> str:
    """The module's own failure in one line: its type, message and line in the module."""
    where = traceback.extract_tb(error.__traceback__)
    line = next((f" (line {f.lineno})" for f in reversed(where) if f.filename == "<module>"), "")
    message = str(error).splitlines()[0][:300] if str(error) else ""
    return f"{type(error).__name__}: {message}{line}"


def main(argv: list[str]) -> int:
    from profiling.harness.sandbox import Channel

    with open(argv[1]) as file:
        request = json.loads(file.read())
    channel = Channel(int(argv[2]))
    import torch

    torch.set_num_threads(1)
    signal.signal(signal.SIGALRM, _alarm)
    for item in request["runs"]:
        signal.alarm(RUN_LIMIT_S)
        try:
            found = run(torch, item["source"], item["device"], item.get("seed", 0))
        except RunTimeout as error:
            found = {"ok": False, "error": str(error)}
        except BaseException as error:  # noqa: BLE001  (the module's own failure is the answer)
            found = {"ok": False, "error": module_failure(error)}
        finally:
            signal.alarm(0)
        channel.send("run", problem=item["problem"], label=item["label"], **found)
    channel.send("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
