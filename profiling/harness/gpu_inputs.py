"""The worker's L1 inputs drawn on the GPU (inputs.generated_on_gpu), as a part of its
Session (worker.py): drawn into the candidate's buffers by the harness's kernels
(draws.py), their references from the input cache, the reference child or the host, the
screen's seed kept on the GPU (device.ResidentSeeds), and whether a launch changed them.

`GpuInputs` holds no state of its own: it reads the Session's (task, options, gpu,
harness_module, gpu_refs, resident, generated) and is mixed into it.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .draws import INPUT_CHECKSUM_KEY, check_draws, checksum_text, launch
from .inputs import Check, Expected, cached_gpu_seed_reference, generated_on_gpu, gpu_seed_reference

if TYPE_CHECKING:  # pycuda is imported only where a GPU is
    from .device import SeedOnGpu


@dataclass(frozen=True)
class Drawn:
    """Inputs drawn on the GPU and not read back before the launch: their checksums
    under a key of this check's (device.keyed_checksum)."""

    key: int
    sums: dict[str, int]


class GpuInputs:
    """Session's methods for L1 inputs drawn on the GPU (see the module's docstring)."""

    def generates_on_gpu(self, check: Check) -> bool:
        """An L1 check of a task with default float inputs, when the request asks for it:
        in a full gate, drawn for every candidate (generate_on_gpu); in the screen, once
        per serving process and kept there (resident_seed_drawn)."""
        return bool(self.options.get("gpu_inputs")) and generated_on_gpu(self.task, check)

    def generate_on_gpu(self, check: Check, buffers: dict) -> tuple[dict | None, Expected, Drawn | None]:
        """Draw the check's inputs into the candidate's buffers with the harness's kernel
        (each input its own stream of the check's seed, as the timed runs' refresh).

        Their reference comes from the input cache when an entry was computed from draws
        with the same checksum (inputs.gpu_seed_reference). Then nothing is read back
        before the launch: returns (None, reference, Drawn), and after the launch
        `inputs_after_launch` tells by a secret-keyed checksum whether the candidate
        changed them. Otherwise (the first candidate of a search, a seed to cross-check
        with the GPU references) the draws are read back now, for the host's reference
        and the guards: returns (inputs, reference, None).
        """
        started = time.monotonic()
        self.draw(check, buffers)
        public = self.public_checksum(buffers)
        cache = self.options.get("input_cache")
        reference = cached_gpu_seed_reference(self.task, check, public, cache)
        if reference is not None and not self.will_cross_check(check):
            key = secrets.randbits(64)
            drawn = Drawn(key, {t.name: self.input_checksum(buffers[t.name], key) for t in self.task.inputs})
            self.add_seconds("generate_inputs", started)
            self.tell_where_inputs_came_from("cache")
            return None, reference, drawn
        inputs = {t.name: buffers[t.name].download() for t in self.task.inputs}
        self.add_seconds("generate_inputs", started)
        if reference is None:
            started = time.monotonic()
            # After the first L1 seed was cross-checked, the reference child computes the
            # others' (what the timed runs' spot checks would use it for, too)
            asks_child = self.gpu_refs is not None and not self.will_cross_check(check)
            elsewhere = self.gpu_refs.expected if asks_child else None
            reference = gpu_seed_reference(self.task, check, inputs, public, cache, elsewhere=elsewhere)
            self.add_seconds("seed_references", started)
        self.tell_where_inputs_came_from(
            "cache" if reference.cached else "gpu" if reference.computed_elsewhere else "host")
        return inputs, reference, None

    def resident_seed_drawn(self, check: Check, buffers: dict) -> tuple[SeedOnGpu, Expected]:
        """The screen's L1 seed, drawn on the GPU (generates_on_gpu) and kept there by this
        serving process (device.ResidentSeeds) with its reference.

        The first candidate to need it draws it into its own buffers and reads it back once,
        for the reference: from the input cache when one was computed from draws with the
        same checksum (the full gate's first L1 seed is the screen's, so either may have
        computed it), else on the host and published there. Later candidates copy it on
        the GPU and read nothing back unless a comparison needs the inputs on the host
        (check_resident)."""
        key = ("gpu", self.task.name, tuple(sorted(check.sizes.items())), check.seed, check.distribution)
        seed = self.resident.find(key)
        if seed is not None:
            self.tell_where_inputs_came_from("resident")
            return seed, seed.host_reference
        started = time.monotonic()
        self.draw(check, buffers)
        public = self.public_checksum(buffers)
        inputs = {t.name: buffers[t.name].download() for t in self.task.inputs}
        self.add_seconds("generate_inputs", started)
        started = time.monotonic()
        cache = self.options.get("input_cache")
        reference = gpu_seed_reference(self.task, check, inputs, public, cache)
        self.add_seconds("seed_references", started)
        self.tell_where_inputs_came_from("cache" if reference.cached else "host")
        # Kept memory-mapped from the entry (just published, if it was computed), not in RAM
        kept = reference if reference.cached else \
            cached_gpu_seed_reference(self.task, check, public, cache) or reference
        seed = self.resident.get(key, inputs, kept, self.harness_module, self.gpu, keep_host_reference=True)
        return seed, kept

    def resident_inputs(self, seed: SeedOnGpu, sizes: dict) -> dict[str, np.ndarray]:
        """A seed drawn on the GPU, read back for a comparison on the host, once its
        bytes are checked to be the draw's (a candidate shares the context with it)."""
        from . import device
        from .worker import RESIDENT_CHANGED, Rejection

        if not self.resident.intact(seed, self.harness_module, self.gpu):
            raise Rejection("out_of_bounds_write", RESIDENT_CHANGED)
        return {t.name: device.download(seed.inputs[t.name], t.numpy_dtype(), t.resolve_shape(sizes))
                for t in self.task.inputs}

    def public_checksum(self, buffers: dict) -> str:
        """What an entry of inputs drawn on the GPU is cached under (INPUT_CHECKSUM_KEY)."""
        return checksum_text({t.name: self.input_checksum(buffers[t.name], INPUT_CHECKSUM_KEY)
                              for t in self.task.inputs})

    def tell_where_inputs_came_from(self, reference: str) -> None:
        """environment.inputs: how many L1 seeds were drawn on the GPU, and where their
        references came from (the input cache, the reference child, the host, or with
        the inputs, the seed the screen's process keeps on the GPU)."""
        self.generated.append(reference)
        counts = ", ".join(f"{self.generated.count(where)} from {label}" for where, label in (
            ("cache", "the input cache"), ("gpu", "the reference child"), ("host", "the host"),
            ("child", "the reference child, which drew them again itself and judged the outputs there"),
            ("resident", "the seed this screening process keeps on the GPU"))
            if where in self.generated)
        self.environment["inputs"] = (f"gpu: {len(self.generated)} L1 seed(s) drawn on the GPU by the "
                                      f"harness's generator; their references: {counts}; L0 on the host")

    def draw(self, check: Check, buffers: dict) -> None:
        """The check's inputs drawn into `buffers` by the harness's kernels (draws.py)."""
        for d in check_draws(self.task, check):
            if d.count:
                launch(self.harness_module, d, buffers[d.name].ptr, self.gpu.stream)
        self.gpu.synchronize()

    def input_checksum(self, buffer, key: int) -> int:
        from . import device

        return device.keyed_checksum(self.harness_module, self.gpu, buffer.ptr, buffer.nbytes, key)

    def inputs_after_launch(self, check: Check, buffers: dict, drawn: Drawn) -> tuple[dict, dict]:
        """(inputs before, inputs after) of a launch on inputs drawn on the GPU and not
        read back before it. The after is read back now; when every input's keyed
        checksum is still the draw's, it is the draw (a change the key cannot see would
        need the key, drawn by the OS after the candidate's module was loaded and never
        on the GPU but as a launch argument of the harness's kernel). When one changed,
        the draw is made again in a buffer of its own and read back as the before, so the
        guards name the changed element as they do for an upload."""
        from . import device

        after = {t.name: buffers[t.name].download() for t in self.task.inputs}
        changed = [t for t in self.task.inputs
                   if self.input_checksum(buffers[t.name], drawn.key) != drawn.sums[t.name]]
        if not changed:
            return after, after
        again = {t.name: device.Buffer(t.name, buffers[t.name].dtype, buffers[t.name].shape, guard_bytes=0)
                 for t in self.task.inputs}
        try:
            self.draw(check, again)
            return {name: b.download() for name, b in again.items()}, after
        finally:
            for b in again.values():
                b.free()
