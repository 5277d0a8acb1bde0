"""The module itself as a reference: its own code, at given sizes, on given tensors.

This runs untrusted code, so it runs only in processes of its own that hold no
candidate's code or memory: the host's reference child (child.py) and, on a GPU host,
gpuref's reference child (Task.reference called with torch tensors there).

    runner = ModuleRunner(source)
    outputs = runner.run(sizes, tensors, weights, compute=torch.float64)

- The source is executed with its size constants set to `sizes` (constants.with_values),
  once per sizes, and `Model(*get_init_inputs())` is built as written under INIT_SEED,
  then cast to the compute dtype (the widest: float64), its own parameters and buffers
  the same numbers in any compute dtype; forward runs with the compute dtype as torch's
  default, so tensors the module makes itself are in it too.
- Forward's arguments are what `get_inputs()` returns (run on the meta device: its
  numbers, not its tensors), with each tensor replaced, in order, by the given ones:
  float tensors in the compute dtype, integer tensors in the module's own dtype.
- The parameters are the given `weights` (the task's inputs named after them), through
  torch.func.functional_call; buffers keep the module's own values, restored before
  every call (a BatchNorm in training mode updates its running statistics in place).
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict

from . import constants

INIT_SEED = 42  # KernelBench's eval seeds its models with 42 (eval_kernel_against_ref's seed_num)
FORWARD_SEED = 0  # forward has no randomness (the importer refuses it); seeded all the same
MODELS_KEPT = 2  # built models kept per runner: a reference and its float32 twin at one size


class ModuleFailed(RuntimeError):
    """The module raised, or gave something that cannot be a task's output."""


@contextlib.contextmanager
def _default_dtype(torch, dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


class ModuleRunner:
    def __init__(self, source: str) -> None:
        self.source = source
        self._namespaces: dict[tuple, dict] = {}
        self._models: OrderedDict[tuple, tuple] = OrderedDict()

    def namespace(self, sizes: dict) -> dict:
        key = tuple(sorted(sizes.items()))
        if key not in self._namespaces:
            namespace = {"__name__": "kernelbench_problem"}
            code = constants.with_values(self.source, dict(sizes))
            exec(compile(code, "<module>", "exec"), namespace)  # noqa: S102  (its own process)
            self._namespaces = {key: namespace}  # one size at a time: the next request's is likely the same
        return self._namespaces[key]

    def model(self, sizes: dict, compute, device):
        """(the module built at these sizes, its buffers as built), kept for the next call."""
        import torch

        key = (tuple(sorted(sizes.items())), str(compute), str(device))
        if key in self._models:
            self._models.move_to_end(key)
            return self._models[key]
        namespace = self.namespace(sizes)
        torch.manual_seed(INIT_SEED)
        with torch.device(device):  # built as written (float32), so its own values do not
            model = namespace["Model"](*list(namespace["get_init_inputs"]()))  # depend on `compute`
        model = model.to(device=device, dtype=compute)
        built = (model, {name: b.detach().clone() for name, b in model.named_buffers()})
        self._models[key] = built
        while len(self._models) > MODELS_KEPT:
            self._models.popitem(last=False)
        return built

    def arguments(self, sizes: dict, tensors: list, device) -> list:
        """get_inputs()'s list with its tensors replaced, in order, by `tensors`."""
        import torch

        namespace = self.namespace(sizes)
        try:
            with torch.device("meta"):
                own = list(namespace["get_inputs"]())
        except Exception:  # noqa: BLE001  (an op meta lacks: draw them for real, once)
            torch.manual_seed(INIT_SEED)
            with torch.device(device):
                own = list(namespace["get_inputs"]())
        slots = [i for i, value in enumerate(own) if isinstance(value, torch.Tensor)]
        if len(slots) != len(tensors):
            raise ModuleFailed(f"get_inputs() gives {len(slots)} tensors here, the task has {len(tensors)}")
        for slot, tensor in zip(slots, tensors, strict=True):
            own[slot] = tensor
        return own

    def own_inputs(self, sizes: dict, seed: int, device) -> list:
        """The tensors get_inputs() itself draws under `seed` (the problem's own inputs)."""
        import torch

        torch.manual_seed(seed)
        with torch.device(device):
            return [v for v in self.namespace(sizes)["get_inputs"]() if isinstance(v, torch.Tensor)]

    def run(self, sizes: dict, tensors: list, weights: dict | None, *, compute, device,
            module_dtypes: list | None = None, perturb_buffers: bool = False) -> list:
        """The module's outputs on these tensors (the module's own parameters when
        `weights` is None; else the given ones, by parameter name)."""
        import torch

        model, buffers = self.model(sizes, compute, device)
        cast = []
        for index, t in enumerate(tensors):
            t = torch.as_tensor(t).to(device)
            if t.is_floating_point():
                t = t.to(compute)
            elif module_dtypes is not None:  # an int64 index the kernel is given as int32
                t = t.to(getattr(torch, module_dtypes[index]))
            cast.append(t)
        arguments = self.arguments(sizes, cast, device)
        parameters = None
        if weights is not None:
            parameters = {name: torch.as_tensor(w).to(device=device, dtype=compute)
                          for name, w in weights.items()}
        with torch.no_grad():
            for name, b in model.named_buffers():
                b.copy_(buffers[name])
                if perturb_buffers and b.is_floating_point():
                    b.add_(1.0)  # still a valid variance, count or scale
            torch.manual_seed(FORWARD_SEED)
            with _default_dtype(torch, compute):
                if parameters is None:
                    out = model(*arguments)
                else:
                    out = torch.func.functional_call(model, parameters, tuple(arguments))
        outputs = list(out) if isinstance(out, tuple | list) else [out]
        if not all(isinstance(o, torch.Tensor) for o in outputs):
            raise ModuleFailed("forward returns something other than tensors")
        return outputs


def float_buffers(runner: ModuleRunner, sizes: dict, compute, device) -> list[str]:
    """The names of the module's floating-point buffers (running statistics and the like)."""
    model, _ = runner.model(sizes, compute, device)
    return [name for name, b in model.named_buffers() if b.is_floating_point()]
