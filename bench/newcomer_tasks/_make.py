"""Builds a newcomer task from a few fields: fp32 tensors unless said, the naive kernel's
one launch (or its launches), compulsory bytes as every tensor read or written once,
FLOPs where the operator's are stated (a product's 2*M*N*K), else none counted."""

from profiling.harness.spec import Task, TensorSpec


def T(name, shape, dtype="float32"):
    return TensorSpec(name, dtype, shape)


def task(name, sizes, l0, inputs, outputs, ref, src, kernel, grid, block, args, tunables=None,
         shared=0, launches=None, scratch=None, flops=None):
    def nbytes(s):
        total = 0
        for spec in (*inputs, *outputs):
            count = 1
            for extent in spec.resolve_shape(s):
                count *= extent
            total += 4 * count
        return float(total)

    plan = {"launches": launches or [{"kernel": kernel, "grid": grid, "block": block, "shared_bytes": shared,
                                      "args": args}],
            "scratch": scratch or [], "tunables": tunables or {}}
    return Task(name=name, description=name, sizes=sizes, l0_sizes=tuple(l0), inputs=tuple(inputs),
                outputs=tuple(outputs), reference=ref, flops=flops or (lambda s: 0.0), bytes=nbytes,
                naive_source=src, naive_plan=plan)
