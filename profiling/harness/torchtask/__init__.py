"""A task from a PyTorch module in KernelBench's format (issue 32): a `Model`, its
`get_inputs()` and `get_init_inputs()`, and module-level size constants.

- `constants.py` reads the size constants from the source (never running it) and
  writes the source again with other values;
- `probe.py` is the child that runs the module (untrusted code) in its own process: on
  torch's meta device at the problem's own sizes (shapes without memory), on the CPU at
  small ones; it also reports parameters, randint bounds and FLOPs;
- `importer.py` plans those runs, fits every tensor dimension to the size constants,
  picks the small sizes that run (L0), and says plainly why a module is not a task;
- `build.py` makes the gate's task of it (`task.py`: a JSON description and the
  spec.Task), checking it at L0 by running the module in the host's reference child
  (`child.py`; `runner.py` is the module run as a reference, there or in gpuref's child);
- `rule.py` is the tolerance rule; `vendor.py` the vendor calls to time on a GPU host.

    python -m profiling.harness.torchtask import ../shared/kernelbench/level1 [--json out.json]
    python -m profiling.harness.torchtask task ../shared/kernelbench/level1/19_ReLU.py [--json] [--save DIR]
"""
