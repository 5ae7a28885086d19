"""Greedy texts and log-likelihoods of llama.cpp's own Python API (llama_cpp.Llama, offline) for
tests/end_to_end/test_served_llama_cpp.py to compare with what the served backend got from llama.cpp's server on the
same GGUF. Runs under .venv-llama:

    .venv-llama/bin/python tests/helpers/llama_cpp_offline_texts.py --requests requests.json --out texts.json

requests.json: {"gguf": path, "n_ctx": int, "requests": [{"prompt": text (or "messages": chat messages), "max_tokens":
int, "stop": [...]}, ...],
"loglikelihoods": [[context, continuation], ...]}. The sampling settings a completions request leaves out are the
server's defaults (its request model's: a repeat penalty of 1.1 among them), read from the installed server, so both
sides compute the same thing. A log-likelihood is computed from the logits of the whole text evaluated at once: the
continuation's tokens are those past the context's own tokens (not the echo's character offsets the backend reads).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from llama_cpp import Llama
from llama_cpp.server.types import CreateCompletionRequest

SERVER_DEFAULTS = ("repeat_penalty", "top_k", "min_p", "presence_penalty", "frequency_penalty")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    asked = json.loads(Path(args.requests).read_text())
    defaults = {name: CreateCompletionRequest.model_fields[name].default for name in SERVER_DEFAULTS}
    engine = Llama(model_path=asked["gguf"], n_ctx=asked["n_ctx"], logits_all=True, verbose=False)
    texts = [text(engine, r, defaults) for r in asked["requests"]]
    scores = [loglikelihood(engine, context, continuation) for context, continuation in asked["loglikelihoods"]]
    Path(args.out).write_text(json.dumps({"texts": texts, "loglikelihoods": scores, "defaults": defaults}))


def text(engine: Llama, request: dict, defaults: dict) -> str:
    """The greedy text of a completions request (its "prompt"), or of a chat request (its "messages", which the
    model's chat format renders as the server's does)."""
    settings = {"max_tokens": request["max_tokens"], "temperature": 0.0, "top_p": 1.0, "stop": request["stop"] or None}
    if "messages" in request:
        return engine.create_chat_completion(request["messages"], **settings, **defaults)["choices"][0]["message"][
            "content"
        ]
    return engine.create_completion(request["prompt"], **settings, **defaults)["choices"][0]["text"]


def loglikelihood(engine: Llama, context: str, continuation: str) -> float:
    """The continuation's summed log-probability given the context, both tokenised by the model's own vocabulary."""
    head = engine.tokenize(context.encode(), add_bos=True)
    whole = engine.tokenize((context + continuation).encode(), add_bos=True)
    assert whole[: len(head)] == head, (context, continuation)
    engine.reset()
    engine.eval(whole)
    logits = np.asarray(engine.scores[: len(whole)], dtype=np.float64)
    top = logits.max(axis=1, keepdims=True)
    log_norm = (np.log(np.exp(logits - top).sum(axis=1, keepdims=True)) + top)[:, 0]
    return float(sum(logits[i - 1, whole[i]] - log_norm[i - 1] for i in range(len(head), len(whole))))


if __name__ == "__main__":
    main()
