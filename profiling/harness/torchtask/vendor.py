"""The vendor of a PyTorch task: the module itself, eager and under torch.compile.

What a user gets without us is their own module on their GPU, as written (its dtypes,
its own parameters) and as torch.compile makes it. These are the calls to time, the
gate's way (bench/vendor.py: TF32 off, 256 MB written before each run to flush the L2,
fresh inputs every run, CUDA events around the call alone, the median of many runs),
on the worker's own GPU, never another's; bench/torchtask_vendor.py times them on a GPU
host. A time belongs to the GPU, driver and torch version it was measured with.
"""

from __future__ import annotations

SETUP = ("model = Model(*get_init_inputs()) under torch.manual_seed(42), on the GPU, in the module's own "
         "dtypes, the module's own parameters; inputs = get_inputs() on the GPU, drawn afresh before every "
         "run (outside the timed interval), at the problem's own sizes (L1)")
TIMED = ("CUDA events around the call alone; TF32 off; 256 MB written before each run to flush the L2; "
         "the median of 30 runs after 3 warm-up runs (compile: after the warm-up that compiles)")


def calls(name: str, sizes: dict[str, int]) -> list[dict]:
    """The vendor calls of the task `name` at its own sizes, as data."""
    size_words = ", ".join(f"{k}={v}" for k, v in sizes.items())
    return [
        {"mode": "eager", "call": "model(*inputs)", "setup": SETUP, "timed": TIMED, "sizes": size_words,
         "command": f"python -m bench.torchtask_vendor <{name}.py> --mode eager"},
        {"mode": "compile", "call": "torch.compile(model)(*inputs)  # default mode", "setup": SETUP,
         "timed": TIMED, "sizes": size_words,
         "command": f"python -m bench.torchtask_vendor <{name}.py> --mode compile"},
    ]
