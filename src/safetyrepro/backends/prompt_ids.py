"""A prompt's token ids, the same for every backend: the tokenizer each backend loads, whether the
model's chat template wraps prompts, and the ids themselves with the beginning-of-sequence token
exactly once.

A chat template that starts with the BOS token (Llama-3, Gemma, Mistral through HF) renders it as
text; tokenizing that text with special tokens added would put a second one in front. So the
template's text is tokenized without special tokens, and plain text with them (the tokenizer adds
BOS when the model has one). The vLLM backend sends these ids (not text) to the engine, so both
backends compute on identical inputs.
"""

from __future__ import annotations

from .base import ModelLoadError

# Longest generation prompt kept (its last tokens); both backends cut the same way.
MAX_PROMPT_TOKENS = 4096


def load_tokenizer(spec):
    """The model's Hugging Face tokenizer, as every backend loads it (revision, remote code)."""
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(
            spec.path, revision=spec.revision, trust_remote_code=spec.trust_remote_code
        )
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"model '{spec.name}': cannot load the tokenizer of {spec.path}: {exc}") from exc


def prompt_format(tokenizer, spec) -> str:
    """ "chat" when the tokenizer has a chat template and the spec does not switch it off, else "plain";
    a spec asking for a template the tokenizer lacks is an error."""
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if spec.chat_template == "on" and not has_template:
        raise ModelLoadError(f"model '{spec.name}': chat_template is 'on' but the tokenizer has none")
    return "chat" if has_template and spec.chat_template != "off" else "plain"


def encode_prompt(tokenizer, prompt: str, fmt: str, max_tokens: int | None = None) -> list[int]:
    """Token ids of `prompt`: the chat template's user turn (with the generation prompt), or plain
    text; BOS once in either case; only the last `max_tokens` ids when given (generation prompts
    are cut at MAX_PROMPT_TOKENS by both backends; log-likelihood contexts are not cut)."""
    if fmt == "chat":
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], tokenize=False, add_generation_prompt=True
        )
        ids = tokenizer(text, add_special_tokens=False).input_ids
    else:
        ids = tokenizer(prompt).input_ids
    return ids[-max_tokens:] if max_tokens else ids
