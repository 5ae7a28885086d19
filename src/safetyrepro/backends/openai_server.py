"""A model behind an OpenAI-compatible server (vLLM's `vllm serve`, llama.cpp's server, a hosted API): the
backend a model entry's `endpoint` selects for both operations (docs/served.md).

- Generation goes through the completions API (the rendered prompt; as the token ids the offline backends compute
  on where the model's tokenizer is known, its `path` or `embedded`) or the chat-completions API (the prompt as one
  user message), with the run's decoding settings, stop strings and each request's own seed
  (`prompt_ids.request_seed`, as the offline backends draw).
- Log-likelihoods go through the completions API with the prompt echoed and its log-probabilities returned
  (`echo`, `logprobs`; vLLM's and llama.cpp's servers give them): with the tokenizer known, the context's and the
  continuation's token ids as the HF backend splits them; without, their text, the continuation's tokens those
  whose echoed texts spell it, refused where a token of the server's spans both or the texts are not the prompt's.
  The chat API serves generation only, and the config check refuses its log-likelihood configs
  (`served_operations`).
- Every response is kept on disk, keyed by the whole request (`ResponseCache`): a rerun, or a cell run again after
  a crash, sends nothing a second time.
- At most `max_in_flight` requests at once and `requests_per_minute` started a minute; a request refused with 429
  or 5xx, or cut off, is tried again with exponential backoff (the server's Retry-After where it gives one), up to
  `retries` times; then the cell fails with one line naming the server and what it answered.
- The API key is read from the environment variable `api_key_env` names, sent as a bearer token and never
  written anywhere: messages name the variable, not the key.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from safetyrepro.backends.base import Backend, ModelLoadError, cut_at_stop
from safetyrepro.core.batching import BatchCondition
from safetyrepro.core.conversation import Prompt, is_conversation, messages
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.messages import excerpt

if TYPE_CHECKING:
    from safetyrepro.configuration.settings import BackendSettings, Settings
    from safetyrepro.core.model_spec import Endpoint, ModelSpec

log = logging.getLogger(__name__)
CHECK_TIMEOUT = 10.0  # seconds the start-up check waits on the server
BACKOFF_SECONDS = 1.0  # the first wait before a retry; doubled each retry, at most BACKOFF_LIMIT
BACKOFF_LIMIT = 60.0
RETRIED = frozenset({408, 409, 429, 500, 502, 503, 504})


class ServerError(ModelLoadError):
    """The server cannot be reached, refuses the key, does not serve the model, or kept failing a request."""


def served_operations(spec: ModelSpec) -> tuple[str, ...]:
    """What a served model can do: generation always; log-likelihoods through the completions API (an echoed
    prompt's log-probabilities), which the chat API has no way to ask for."""
    assert spec.endpoint is not None
    if spec.endpoint.api == "completions":
        return ("generate", "loglikelihood")
    return ("generate",)


def api_key(endpoint: Endpoint) -> str | None:
    """The key from the environment variable the endpoint names (None when it names none), without the spaces and
    line ends around it (a .env file's \\r); one that is not printable ASCII is refused, naming the variable only
    (an HTTP header cannot hold it, and the error would quote it)."""
    if endpoint.api_key_env is None:
        return None
    key = os.environ.get(endpoint.api_key_env, "").strip()
    if not key:
        raise ServerError(f"the environment variable {endpoint.api_key_env} (endpoint.api_key_env) is not set")
    if not (key.isascii() and key.isprintable()):
        raise ServerError(
            f"the environment variable {endpoint.api_key_env} (endpoint.api_key_env) holds characters no HTTP header "
            "can carry (not printable ASCII): set it to the key alone"
        )
    return key


def scrubbed(endpoint: Endpoint, text: str) -> str:
    """`text` (a server's words, an error's) without the key, should it hold it."""
    raw = os.environ.get(endpoint.api_key_env, "") if endpoint.api_key_env else ""
    for key in sorted({raw, raw.strip()} - {""}, key=len, reverse=True):
        text = text.replace(key, "<the key>")
    return text


def _failure(endpoint: Endpoint, error: Exception) -> str:
    """An HTTP client error in a few words, without the key."""
    return scrubbed(endpoint, f"{type(error).__name__}: {excerpt(str(error), 200)}")


def _client(endpoint: Endpoint, timeout: float):
    """An HTTP client for the endpoint, with its key as a bearer token (httpx's line per request is left out of
    the logs: the backend logs each call's count)."""
    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)

    key = api_key(endpoint)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    limits = httpx.Limits(max_connections=max(endpoint.max_in_flight, 10))
    return httpx.Client(base_url=endpoint.url.rstrip("/") + "/", headers=headers, timeout=timeout, limits=limits)


def _refusal(endpoint: Endpoint, status: int, body: str) -> str:
    """One line for an answer other than success (the server's words shortened; never the key)."""
    words = scrubbed(endpoint, " ".join(body.split())[:200])
    if status in (401, 403):
        where = f"the key in {endpoint.api_key_env}" if endpoint.api_key_env else "a request without a key"
        return f"the server at {endpoint.host()} refused {where} ({status}: {words})"
    return f"the server at {endpoint.host()} answered {status}: {words}"


def check_server(endpoint: Endpoint) -> dict[str, Any]:
    """Ask the server which models it serves (GET /models) and what it is (vLLM's GET /version, at the root):
    ServerError in one line when it does not answer, refuses the key, or does not serve `endpoint.model`.
    Returns what the GRID card records of it."""
    import httpx

    with _client(endpoint, CHECK_TIMEOUT) as client:
        try:
            answer = client.get("models")
        except httpx.HTTPError as error:
            raise ServerError(f"no server answers at {endpoint.url} ({_failure(endpoint, error)})") from None
        if answer.status_code != 200:
            raise ServerError(_refusal(endpoint, answer.status_code, answer.text))
        try:
            listed = {str(entry["id"]): entry for entry in answer.json()["data"] if isinstance(entry, dict)}
        except (ValueError, KeyError, TypeError):
            listed = None
        if not listed:
            raise ServerError(f"the server at {endpoint.host()} answered GET /models with no model list")
        if endpoint.model not in listed:
            names = ", ".join(excerpt(name, 60) for name in sorted(listed)[:5]) + (", ..." if len(listed) > 5 else "")
            raise ServerError(f"the server at {endpoint.host()} does not serve '{endpoint.model}' (it serves: {names})")
        version = None
        try:
            reply = client.get(httpx.URL(endpoint.url).join("/version"))
            if reply.status_code == 200:
                version = reply.json().get("version")
        except (httpx.HTTPError, ValueError, AttributeError):
            pass  # a server without vLLM's /version (a hosted API) says nothing of itself there
    entry = listed[endpoint.model]
    stated = entry.get("max_model_len")
    return {
        "host": endpoint.host(),
        "model": endpoint.model,
        "api": endpoint.api,
        "owned_by": _words(entry.get("owned_by")),
        "root": _words(entry.get("root")),
        "max_model_len": stated if isinstance(stated, int) and not isinstance(stated, bool) and stated > 0 else None,
        "server_version": _words(version),
    }


def _words(value: Any) -> str | None:
    """A server's own words about itself, on one line and kept short, or None."""
    if value is None:
        return None
    words = " ".join(str(value).split())
    return words if len(words) <= 80 else words[:77] + "..."


def generation_request(endpoint: Endpoint, prompt: Prompt, sent: Any, **sampling: Any) -> tuple[str, dict[str, Any]]:
    """The API path and body of one generation request: on the chat API `prompt` as one user message (a
    conversation as its turns), on the completions API `sent` (its text, or its token ids)."""
    body = {"model": endpoint.model, **sampling}
    if endpoint.api == "chat":
        return "chat/completions", body | {"messages": messages(prompt)}
    return "completions", body | {"prompt": sent}


def seeds_honoured(endpoint: Endpoint) -> bool:
    """Whether the server gives the same sampled text twice for one seed: one request (16 tokens at temperature 1)
    sent twice, past the responses kept (a server that ignores seeds draws two texts, all but surely)."""
    import httpx

    words = "Write one sentence about the sea."
    path, body = generation_request(endpoint, words, words, max_tokens=16, temperature=1.0, top_p=1.0, seed=1)
    texts = []
    with _client(endpoint, CHECK_TIMEOUT * 6) as client:
        for _ in range(2):
            try:
                answer = client.post(path, json=body)
            except httpx.HTTPError as error:
                raise ServerError(f"no server answers at {endpoint.url} ({_failure(endpoint, error)})") from None
            if answer.status_code != 200:
                raise ServerError(_refusal(endpoint, answer.status_code, answer.text))
            text = completion(endpoint.api, _json(answer))
            if text is None:
                raise ServerError(f"the server at {endpoint.host()} answered a sampled request with no completion")
            texts.append(text)
    return texts[0] == texts[1]


def _json(answer) -> Any:
    """A response's JSON, or None where it is not JSON."""
    try:
        return answer.json()
    except ValueError:
        return None


def completion(api: str, response: Any) -> str | None:
    """The text of a response's first choice (the chat API's message content), or None where it has none."""
    try:
        choice = response["choices"][0]
        text = choice["message"]["content"] if api == "chat" else choice["text"]
    except (KeyError, IndexError, TypeError):
        return None
    return text if isinstance(text, str) else "" if text is None and api == "chat" else None


def prompt_logprobs(response: Any, length: int) -> list[float] | None:
    """The log-probabilities of an echoed prompt's `length` tokens (the first, which nothing precedes, is None),
    or None where the response does not hold exactly those: the echo must hold the whole prompt and then the
    tokens generated (`usage.completion_tokens`, else the one asked for), or the continuation's would be read
    from other positions (a server that leaves the first token out of its echo)."""
    try:
        logprobs = response["choices"][0]["logprobs"]["token_logprobs"]
        generated = (response.get("usage") or {}).get("completion_tokens", 1)
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    if not isinstance(logprobs, list) or not isinstance(generated, int) or len(logprobs) - generated != length:
        return None
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in logprobs[1:length]):
        return None
    return logprobs[:length]


def echoed_text(response: Any) -> tuple[list[str], list[Any]] | None:
    """An echoed text prompt's tokens, their texts and log-probabilities (the first None), then the generated one's;
    None where the response does not hold them (two lists as long, of texts and of numbers or None)."""
    try:
        logprobs = response["choices"][0]["logprobs"]
        tokens, values = logprobs["tokens"], logprobs["token_logprobs"]
    except (KeyError, IndexError, TypeError):
        return None
    if not (isinstance(tokens, list) and isinstance(values, list)) or not tokens or len(tokens) != len(values):
        return None
    if not all(isinstance(t, str) for t in tokens):
        return None
    if not all(v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in values):
        return None
    return tokens, values


def continuation_logprobs(response: Any, context: str, continuation: str) -> list[float]:
    """The log-probabilities of the echoed tokens of `context + continuation` that spell the continuation: the
    echo's token texts, after a leading token of its own (vLLM echoes the BOS as "<bos>"), must spell the prompt and
    split where the continuation starts; ValueError, in one line, where they do not (a token spanning both, or texts
    that are not the prompt's: a byte of a character cut between tokens, a space the tokenizer adds) or where a token
    of the continuation has no finite log-probability. Character offsets (`text_offset`) are not trusted: servers
    count them from texts that are not the prompt's."""
    if not continuation:
        raise ValueError("empty continuation")
    echoed = echoed_text(response)
    assert echoed is not None  # `_whole` kept only responses that hold it
    tokens, values = echoed
    prompt = context + continuation
    for start in (0, 1):
        spelled, bounds = "", {}
        for index in range(start, len(tokens)):
            bounds.setdefault(len(spelled), index)
            spelled += tokens[index]
            if not prompt.startswith(spelled):
                break
            if spelled == prompt:
                if len(context) not in bounds:
                    raise ValueError(
                        f"the server's tokens of the prompt do not split where the continuation "
                        f"{excerpt(continuation, 40)} starts (a token spans the context's end): give the model's "
                        "tokenizer (path) to send token ids"
                    )
                picked = values[bounds[len(context)] : index + 1]
                if not all(isinstance(v, (int, float)) and math.isfinite(v) for v in picked):
                    raise ValueError(
                        f"the server gave no finite log-probability for a token of {excerpt(continuation, 40)}"
                    )
                return picked
    raise ValueError(
        f"the server's echoed tokens do not spell the prompt ({excerpt(''.join(tokens), 60)}): its continuation "
        "cannot be found among them; give the model's tokenizer (path) to send token ids"
    )


def describe_served(spec: ModelSpec) -> dict[str, Any]:
    """What the GRID card and the run record hold of a served model: its entry, what its server says of itself
    (`check_server`) and whether it honoured a seed (`seeds_honoured`), never the key; and its tokenizer's files or
    hub snapshot, as `running.models.describe_model` has a model's, where it has one."""
    from safetyrepro.running.models import describe_model

    assert spec.endpoint is not None
    info = (
        describe_model(spec)
        if spec.path
        else {
            "name": spec.name,
            "path": spec.path,
            "precision": spec.precision,
            "revision": spec.revision,
            "trust_remote_code": spec.trust_remote_code,
        }
    )
    return info | {"endpoint": check_server(spec.endpoint) | {"seeds_honoured": seeds_honoured(spec.endpoint)}}


class ResponseCache:
    """Responses on disk, one JSON file each, named by the SHA-256 of the whole request (the endpoint's URL and
    the request's path and body): written atomically, so a crash leaves a response whole or absent."""

    def __init__(self, folder: Path):
        self.folder = folder

    @staticmethod
    def key(url: str, path: str, body: Mapping[str, Any]) -> str:
        """The request's key: everything that decides its answer (the key is not: it decides only whether)."""
        return hashlib.sha256(json.dumps([url, path, body], sort_keys=True).encode()).hexdigest()

    def _file(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        """The response kept under `key`, or None (a damaged file is none: the request is sent again)."""
        try:
            return json.loads(self._file(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, key: str, response: dict) -> None:
        """Keep `response` under `key`."""
        from safetyrepro.results.storage import write_atomic

        path = self._file(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, lambda tmp: tmp.write_text(json.dumps(response), encoding="utf-8"))


class RateLimit:
    """At most `per_minute` requests started a minute (evenly spaced), across threads; no limit with None."""

    def __init__(self, per_minute: float | None):
        self.interval = 60.0 / per_minute if per_minute else 0.0
        self.next_start = 0.0
        self.lock = threading.Lock()

    def wait(self) -> None:
        if not self.interval:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.next_start)
            self.next_start = start + self.interval
        time.sleep(max(0.0, start - now))


class OpenAIServerBackend(Backend):
    """A model behind an OpenAI-compatible server: requests sent concurrently, responses kept on disk."""

    def __init__(self, spec: ModelSpec, cache_dir: str):
        from safetyrepro.backends.prompt_ids import load_tokenizer, prompt_format

        assert spec.endpoint is not None
        self.spec, self.endpoint = spec, spec.endpoint
        self.server = check_server(self.endpoint)
        # the chat API sends text, the server's template around it: the tokenizer serves the completions API alone
        self.tokenizer = load_tokenizer(spec) if spec.path and self.endpoint.api == "completions" else None
        if self.endpoint.api == "chat":
            self.prompt_format = "chat"
        else:
            self.prompt_format = prompt_format(self.tokenizer, spec) if self.tokenizer is not None else "plain"
        self.cache = ResponseCache(Path(cache_dir) / spec.name)
        self.limit = RateLimit(self.endpoint.requests_per_minute)
        self.client = _client(self.endpoint, self.endpoint.timeout_seconds)
        self.sent = 0  # requests sent to the server (not answered from the cache)
        log.info(
            "model %s: %s at %s (server %s), %s prompts",
            spec.name,
            self.endpoint.model,
            self.endpoint.host(),
            self.server["server_version"] or "of unknown version",
            self.prompt_format,
        )

    def _post(self, path: str, body: dict) -> dict:
        """One request's response: from the cache, else from the server (tried again on 429, 5xx, a cut-off
        connection and an answer that is not JSON, with backoff) and then kept, once it holds what was asked."""
        import httpx

        key = ResponseCache.key(self.endpoint.url, path, body)
        kept = self.cache.get(key)
        if kept is not None and self._whole(kept, body):
            return kept
        wait, last = BACKOFF_SECONDS, ""
        for attempt in range(self.endpoint.retries + 1):
            if attempt:
                time.sleep(wait)
                wait = min(2 * wait, BACKOFF_LIMIT)
            self.limit.wait()
            try:
                answer = self.client.post(path, json=body)
            except httpx.HTTPError as error:  # refused, cut off, timed out
                last = _failure(self.endpoint, error)
                continue
            self.sent += 1
            if answer.status_code == 200:
                response = _json(answer)
                if response is None:
                    last = "an answer that is not JSON"
                    continue
                if not self._whole(response, body):  # as the server answers, not a fault that passes: not kept
                    asked = (
                        "the prompt's log-probabilities (echo with logprobs)" if body.get("echo") else "a completion"
                    )
                    raise ServerError(
                        f"model '{self.spec.name}': the server at {self.endpoint.host()} answered without {asked}"
                    )
                self.cache.put(key, response)
                return response
            last = _refusal(self.endpoint, answer.status_code, answer.text)
            if answer.status_code not in RETRIED:
                raise ServerError(f"model '{self.spec.name}': {last}")
            wait = max(wait, _retry_after(answer.headers.get("retry-after")))
        raise ServerError(
            f"model '{self.spec.name}': a request to the server at {self.endpoint.host()} failed "
            f"{self.endpoint.retries + 1} times; the last: {last}"
        )

    def _whole(self, response: Any, body: dict) -> bool:
        """Whether a response holds what its request asked for: a completion, and with an echoed prompt its
        log-probabilities."""
        if completion(self.endpoint.api, response) is None:
            return False
        if not body.get("echo"):
            return True
        if isinstance(body["prompt"], str):
            return echoed_text(response) is not None
        return prompt_logprobs(response, len(body["prompt"])) is not None

    def _post_all(self, path: str, bodies: Sequence[dict]) -> list[dict]:
        """The responses to every request, in order, at most `max_in_flight` at once."""
        with ThreadPoolExecutor(self.endpoint.max_in_flight) as pool:
            return list(pool.map(lambda body: self._post(path, body), bodies))

    def _prompt(self, prompt: Prompt, max_tokens: int | None) -> tuple[Any, list[int]]:
        """What a completions request sends for `prompt` (its token ids where the tokenizer is known, else its
        text) and the numbers its seed is drawn from. A conversation on the completions API needs the tokenizer's
        chat template: ValueError without a tokenizer."""
        from safetyrepro.backends.prompt_ids import CONVERSATION_NEEDS_TEMPLATE, encode_prompt

        if self.tokenizer is None:  # the text itself (the chat API's message, or a prompt without a tokenizer)
            if is_conversation(prompt):
                if self.endpoint.api != "chat":
                    raise ValueError(f"model '{self.spec.name}': {CONVERSATION_NEEDS_TEMPLATE}")
                return prompt, list(json.dumps(messages(prompt)).encode("utf-8"))
            return prompt, list(prompt.encode("utf-8"))
        ids = encode_prompt(self.tokenizer, prompt, self.prompt_format, max_tokens)
        return ids, ids

    def generate_seeds(
        self,
        prompts: Sequence[Prompt],
        decoding: Decoding,
        seeds: Sequence[int],
        stop: Sequence[str] = (),
        batch_size: int | None = None,
    ) -> dict[int, list[str]]:
        """Every request of the cell, `max_in_flight` at a time; the server forms the batches (a batch size is
        refused). A completion's text is its new token ids decoded alone where the server returns them and the
        tokenizer is known (as the offline backends store it), else the server's text; cut at the first stop."""
        from safetyrepro.backends.base import completion_text
        from safetyrepro.backends.prompt_ids import prompt_limit, request_seed

        if batch_size is not None:
            raise ValueError("a served model's batches are its server's: a batch-size axis needs the HF backend")
        limit = prompt_limit(self.max_model_len(), decoding.max_new_tokens)
        encoded = [self._prompt(p, limit) for p in prompts]
        sampling = {
            "max_tokens": decoding.max_new_tokens,
            "temperature": 0.0 if decoding.greedy else decoding.temperature,
            "top_p": 1.0 if decoding.greedy else decoding.top_p,
            **({"stop": list(stop)} if stop else {}),
        }
        # vLLM returns the new token ids too, which the tokenizer decodes as the offline backends do
        if self.tokenizer is not None and self.server["server_version"]:
            sampling["return_token_ids"] = True
        bodies, path = [], ""
        for seed in seeds:
            for prompt, (sent, numbers) in zip(prompts, encoded):
                path, body = generation_request(
                    self.endpoint, prompt, sent, **sampling, seed=request_seed(seed, numbers)
                )
                bodies.append(body)
        started, sent_before = time.perf_counter(), self.sent
        responses = self._post_all(path, bodies)
        texts = [self._text(response, stop, completion_text) for response in responses]
        log.info(
            "generate %s: %d requests, %d sent to the server (the rest kept from before), %.1f s",
            self.spec.name,
            len(bodies),
            self.sent - sent_before,
            time.perf_counter() - started,
        )
        return {seed: texts[i * len(prompts) : (i + 1) * len(prompts)] for i, seed in enumerate(seeds)}

    def _text(self, response: dict, stop: Sequence[str], completion_text) -> str:
        """A completion's stored text (see `generate_seeds`) of a response `_whole` passed."""
        ids = response["choices"][0].get("token_ids") if self.tokenizer is not None else None
        if isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            return completion_text(self.tokenizer, ids, stop)
        return cut_at_stop(completion(self.endpoint.api, response), stop)

    def loglikelihood(self, requests: Sequence[tuple[str, str]], batch_size: int | None = None) -> list[float]:
        """Each continuation's summed log-probability, from one prompt echoed with its log-probabilities: with the
        tokenizer known, the context's and the continuation's token ids as the HF backend has them, the
        continuation's the last ones of the prompt's; without, the text of both, the continuation's tokens those
        whose echoed texts spell it (`continuation_logprobs`)."""
        from safetyrepro.backends.prompt_ids import encode_prompt

        if "loglikelihood" not in served_operations(self.spec):
            raise ServerError(
                f"model '{self.spec.name}' serves generation only: log-likelihoods need the completions API"
            )
        targets, bodies = [], []
        for context, continuation in requests:
            if self.tokenizer is None:
                targets.append((context, continuation))
                prompt: Any = context + continuation
            else:
                if self.prompt_format == "chat":
                    continuation = continuation.lstrip()
                target = self.tokenizer(continuation, add_special_tokens=False).input_ids
                if not target:
                    raise ValueError(f"empty continuation after tokenisation: {continuation!r}")
                prompt = encode_prompt(self.tokenizer, context, self.prompt_format) + target
                targets.append(len(target))
            body = {"model": self.endpoint.model, "prompt": prompt, "max_tokens": 1, "temperature": 0.0}
            bodies.append(body | {"echo": True, "logprobs": 0})
        scores = []
        for body, target, response in zip(bodies, targets, self._post_all("completions", bodies)):
            if isinstance(target, tuple):
                scores.append(float(sum(continuation_logprobs(response, *target))))
            else:
                logprobs = prompt_logprobs(response, len(body["prompt"]))  # whole: `_post` kept it so
                scores.append(float(sum(logprobs[len(logprobs) - target :])))
        return scores

    def max_model_len(self) -> int | None:
        """The context the server states for the model (vLLM's GET /models), else None."""
        return self.server.get("max_model_len")

    def close(self) -> None:
        self.client.close()


def _retry_after(header: str | None) -> float:
    """The seconds a Retry-After header asks for (a number of seconds, or an HTTP date), 0 when absent or neither;
    at most BACKOFF_LIMIT."""
    from email.utils import parsedate_to_datetime

    if not header:
        return 0.0
    try:
        seconds = float(header)
    except ValueError:
        try:
            seconds = parsedate_to_datetime(header).timestamp() - time.time()
        except (TypeError, ValueError):
            return 0.0
    return min(max(seconds, 0.0), BACKOFF_LIMIT)


class OpenAIServer(Backend):
    """The declarations of the backend of a served model (`endpoint`); `load` builds `OpenAIServerBackend`."""

    label = "OpenAI-compatible server"
    requires = ("httpx",)
    packages = ("httpx",)

    @classmethod
    def load(cls, spec: ModelSpec, **options: Any) -> Backend:
        return OpenAIServerBackend(spec, **options)

    @classmethod
    def load_options(cls, settings: Settings, loaded: Mapping[str, Backend]) -> dict[str, Any]:
        """Where its responses are kept: results/responses/<model>/ (`ResponseCache`)."""
        return {"cache_dir": str(settings.results_dir / "responses")}

    @classmethod
    def batch_condition(cls, backend: BackendSettings, batch_size: int | None) -> BatchCondition:
        """The server's own batches."""
        return BatchCondition(None, False)

    @classmethod
    def describe_batches(cls, condition: BatchCondition) -> str:
        return "the server's own batches"
