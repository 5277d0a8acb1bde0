"""A scripted stand-in for the GPU, for tests of the walker's mechanics (CI has no GPU).

SYNTHETIC NUMBERS: each flag divides a made-up time, and `failing` states are scripted to
be wrong. It says nothing about how fast any kernel is. Real lineages are recorded on
the H200 (python -m lineage.engine walk --record) and replayed.
"""

from search.engine.types import Measurement

GAIN = {"OPT_RESTRICT": 1.02, "OPT_LAUNCH_BOUNDS": 1.01, "OPT_GRID_STRIDE": 1.2,
        "OPT_VEC4": 1.3, "OPT_UNROLL": 1.05}


class ScriptedGpu:
    """Answers every submitted state with a made-up time; `failing` states are wrong."""

    def __init__(self, expert, failing=()):
        self.by_hash = {expert.candidate(s).content_hash(): s for s in expert.states()}
        self.failing = set(failing)
        self.ready = []
        self.submitted = 0

    def submit(self, task, candidate):
        self.submitted += 1
        state = self.by_hash[candidate.content_hash()]
        if state in self.failing:
            m = Measurement(status="rejected", guard="wrong_values", message="L0 n=4099: off by one",
                            gpu="scripted")
        else:
            ms = 1.0
            for flag in state:
                ms /= GAIN[flag]
            m = Measurement(status="passed", time_ms=ms, metrics={"dram_bytes": 2e9 * ms},
                            bottleneck="memory", gpu="scripted")
        self.ready.append((candidate.content_hash(), m))

    def collect(self, timeout_s):
        ready, self.ready = self.ready, []
        return ready
