"""Judges: read a node's measurement, name its bottleneck, propose and score patches.

RuleJudge needs nothing but the profile; LLMJudge talks to any OpenAI-compatible
endpoint and raises JudgeError when it cannot answer, so the search can fall back to
the rules and say so.
"""

from .llm import LLMConfigError, LLMJudge, LLMUsage, candidate_diff
from .rules import BOTTLENECKS, RuleJudge

__all__ = ["BOTTLENECKS", "LLMConfigError", "LLMJudge", "LLMUsage", "RuleJudge", "candidate_diff"]
