"""The scorer "judge": a judge model (one of the config's `judges`) asked a question about each reply
(safetyrepro.running.judge). The question is its argument: a module with `question(item, reply, labels)`
and `read(answer, item, labels)`, by default the option question of safetyrepro.benchmarks.judge_question.
The module may word its question otherwise too (`PHRASINGS`): a scorer axis value's `question` names one."""

from __future__ import annotations

from safetyrepro.core.scorer_names import JUDGE
from safetyrepro.scorers.base import Scorer

OPTION_QUESTION = "benchmarks.judge_question"  # which option does the reply give?


class Judge(Scorer):
    """Labels by a judge model's answers to `question` (a module named relative to the package, or a plugin's by
    its full name); the pipeline asks the judge, which the scorer axis's value names."""

    name = JUDGE
    asks_judge = True

    def __init__(self, question: str = OPTION_QUESTION):
        self.question = question
        self.modules = ("running.judge", question)
