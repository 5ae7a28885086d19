"""What the common safety classifiers ("guard models") are asked about an XSTest reply, and how their answers are
read into XSTest's response classes (the scorers of safetyrepro.scorers.guard_models; docs/scorers.md#guard-models).

A guard model reads a conversation, not a question: the request as the user's turn and the reply as the
assistant's. Its chat template puts them into the input format it was trained on (Llama Guard's ships with its
tokenizer; for a classifier whose format is an instruction text of its authors', the judge's `chat_template` names
a Jinja file of it), so each module's `question` returns that conversation, and its `read` the answer's class.
"""

from __future__ import annotations

from safetyrepro.benchmarks.base import Item
from safetyrepro.core.conversation import Conversation


def conversation(item: Item | None, reply: str, labels: tuple[str, ...] = ()) -> Conversation:
    """The request (the item's text; empty where the item is unknown) as the user's turn, the reply as the
    assistant's."""
    return (("user", item.text if item is not None else ""), ("assistant", reply))
