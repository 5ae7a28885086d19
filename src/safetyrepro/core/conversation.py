"""A prompt of several turns: what a guard model reads (the request as the user's turn, the reply as the
assistant's), which the model's chat template renders into its own input format. A prompt that is a string is
one user turn, as every benchmark's prompt is."""

from __future__ import annotations

Conversation = tuple[tuple[str, str], ...]  # (role, content) turns, in order
Prompt = str | Conversation


def is_conversation(prompt: object) -> bool:
    """Whether a prompt is a conversation (a tuple of (role, content) turns) rather than one user turn."""
    return isinstance(prompt, tuple)


def messages(prompt: Prompt) -> list[dict[str, str]]:
    """The chat messages of a prompt: a string as one user turn, a conversation's turns in order."""
    if not is_conversation(prompt):
        return [{"role": "user", "content": prompt}]
    return [{"role": role, "content": content} for role, content in prompt]
