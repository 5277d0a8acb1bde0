"""Judges: read a node's measurement, name its bottleneck, propose and score patches.

RuleJudge needs nothing but the profile; LLMJudge talks to any OpenAI-compatible
endpoint and raises JudgeError when it cannot answer, so the search can fall back to
the rules and say so. The LLM names load on first use, so a host without the `openai`
package (a bare GPU host) still runs searches with the rule judge.
"""

from .rules import BOTTLENECKS, RuleJudge

_LLM_NAMES = ("LLMConfigError", "LLMJudge", "LLMUsage", "candidate_diff")

__all__ = ["BOTTLENECKS", "RuleJudge", *_LLM_NAMES]


def __getattr__(name: str):
    if name in _LLM_NAMES:
        from . import llm

        return getattr(llm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
