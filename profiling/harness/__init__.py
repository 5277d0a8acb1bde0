"""The evaluation gate: compile -> verify -> time -> profile, for untrusted CUDA kernels.

A pure package. It imports numpy (and pycuda on a GPU host), never Django, and runs
under the GPU machine's own Python. Bump HARNESS_VERSION whenever a change could alter a
verdict: stored evaluations are keyed on it.
"""

HARNESS_VERSION = "0.1.0"
