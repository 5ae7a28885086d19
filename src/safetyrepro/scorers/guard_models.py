"""Scorers that ask a guard model (a safety classifier served as a judge is) about each reply and read its answer
format into the benchmark's labels: Llama Guard's safe/unsafe, WildGuard's three answers, the HarmBench
classifier's Yes/No. Each asks its question module (safetyrepro.benchmarks.xstest.guards: the request and the reply
as a conversation, which the guard's chat template formats) through the judge machinery; a scorer axis value names
the guard model as a judge (docs/scorers.md#guard-models). They label XSTest's replies."""

from __future__ import annotations

from safetyrepro.scorers.judge import Judge


class GuardModel(Judge):
    """A judge-asking scorer whose question is the conversation of a guard model's format (`format`, a module of
    safetyrepro.benchmarks.xstest.guards)."""

    benchmarks = ("xstest",)
    format: str

    def __init__(self, question: str | None = None):
        super().__init__(question or f"benchmarks.xstest.guards.{self.format}")
        self.modules = (*self.modules, "scorers.judge")  # its base class: the judge scorer's code is its own too


class LlamaGuard(GuardModel):
    name = "llamaguard"
    format = "llama_guard"


class WildGuard(GuardModel):
    name = "wildguard"
    format = "wildguard"


class HarmBenchClassifier(GuardModel):
    name = "harmbench"
    format = "harmbench"
