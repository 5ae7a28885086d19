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

import hashlib
import os
from collections.abc import Sequence

from safetyrepro.backends.base import ModelLoadError
from safetyrepro.core.conversation import Prompt, is_conversation, messages

CONVERSATION_NEEDS_TEMPLATE = (
    "a prompt of several turns (a guard model's request and reply) needs the model's chat template: its tokenizer "
    "has none or chat_template is 'off' (give the model's input format as a Jinja file: chat_template: <file>)"
)
# Longest generation prompt kept (BOS and its last tokens); both backends cut the same way.
MAX_PROMPT_TOKENS = 4096


def load_tokenizer(spec):
    """The model's Hugging Face tokenizer, as every backend loads it (revision, remote code), with the spec's chat
    template file in place of its own where it gives one."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(
            spec.path, revision=spec.revision, trust_remote_code=spec.trust_remote_code
        )
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"model '{spec.name}': cannot load the tokenizer of {spec.path}: {exc}") from exc
    if spec.template_file() is not None:
        text = spec.template_file().read_bytes()
        if hashlib.sha256(text).hexdigest() != spec.chat_template_sha256:
            raise ModelLoadError(
                f"model '{spec.name}': its chat template file {spec.chat_template} changed since the run's config was "
                "loaded: start the run again"
            )
        tokenizer.chat_template = text.decode("utf-8")
    return tokenizer


def prompt_format(tokenizer, spec) -> str:
    """ "chat" when the tokenizer has a chat template and the spec does not switch it off, else "plain";
    a spec asking for a template the tokenizer lacks is an error."""
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if spec.chat_template == "on" and not has_template:
        raise ModelLoadError(f"model '{spec.name}': chat_template is 'on' but the tokenizer has none")
    return "chat" if has_template and spec.chat_template != "off" else "plain"


def load_config(spec):
    """The model's Hugging Face config (its context length), as every backend reads it."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(spec.path, revision=spec.revision, trust_remote_code=spec.trust_remote_code)
    except (OSError, ValueError) as exc:
        raise ModelLoadError(f"model '{spec.name}': cannot load the config of {spec.path}: {exc}") from exc


# The config keys vLLM reads a model's context length from, the smallest winning (vLLM 0.32/0.33,
# transformers_utils/model_arch_config_convertor.py, derive_max_model_len_and_key).
CONTEXT_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
)


def context_length(config, tokenizer) -> int | None:
    """The model's context in tokens, as vLLM derives it for generation (config/model.py,
    _get_and_verify_max_len), or less: the smallest of the config's CONTEXT_KEYS (vLLM lets a
    config's own `model_max_length` override the others, even upwards: here it is one more bound)
    and the tokenizer's `model_max_length`, without the RoPE scaling vLLM lets lengthen it (vLLM
    accepts a smaller `max_model_len`). None when nothing states it. Both backends cut prompts by it, and vLLM is started
    with it as `max_model_len`, so no prompt that reaches vLLM exceeds what it accepts (one that did
    would abort the whole call)."""
    text = getattr(config, "text_config", None) or config
    lengths = [getattr(text, key) for key in CONTEXT_KEYS if isinstance(getattr(text, key, None), int)]
    stated = getattr(tokenizer, "model_max_length", None)
    if isinstance(stated, int) and stated < 10**12:  # transformers' "not stated" is 1e30
        lengths.append(stated)
    return min(lengths) if lengths else None


def prompt_limit(context: int | None, max_new_tokens: int) -> int:
    """The longest generation prompt kept with room for `max_new_tokens`: MAX_PROMPT_TOKENS, or less
    for a model with a shorter context (`context_length`; Yi-1.5-9B-Chat has 4,096)."""
    limit = MAX_PROMPT_TOKENS if context is None else min(MAX_PROMPT_TOKENS, context - max_new_tokens)
    if limit < 1:
        raise ModelLoadError(
            f"a context of {context} tokens leaves no room for a prompt and {max_new_tokens} new tokens"
        )
    return limit


def request_seed(seed: int, ids: Sequence[int]) -> int:
    """One request's own random seed, from the envelope seed and the prompt's token ids (63 bits:
    vLLM keeps seeds in int64). Items that share an envelope seed then draw independent noise on
    either backend, and a request's draws depend on nothing else in its call."""
    digest = hashlib.sha256(f"{seed}:{','.join(map(str, ids))}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def encode_prompt(tokenizer, prompt: Prompt, fmt: str, max_tokens: int | None = None) -> list[int]:
    """Token ids of `prompt`: the chat template's user turn (or a conversation's turns), with the
    generation prompt, or plain text; BOS once in either case; a longer prompt than `max_tokens` keeps
    its BOS and its last tokens (generation prompts are cut at `prompt_limit` by both backends;
    log-likelihood contexts are not cut). A conversation needs the chat template: ValueError without."""
    if fmt == "chat":
        text = tokenizer.apply_chat_template(messages(prompt), tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False).input_ids
    elif is_conversation(prompt):
        raise ValueError(CONVERSATION_NEEDS_TEMPLATE)
    else:
        ids = tokenizer(prompt).input_ids
    if not max_tokens or len(ids) <= max_tokens:
        return ids
    head = ids[:1] if tokenizer.bos_token_id is not None and ids[0] == tokenizer.bos_token_id else []
    return head + ids[len(ids) - (max_tokens - len(head)) :]


def shared_prefix_length(sequences: Sequence[Sequence[int]]) -> int:
    """Leading token ids all sequences share (a cell's instructions and few-shot examples), leaving
    each at least one id of its own."""
    common = os.path.commonprefix([list(s) for s in sequences])
    return max(0, min(len(common), min(len(s) for s in sequences) - 1))
