"""A model behind an OpenAI-compatible server (safetyrepro.backends.openai_server): its config checked in one line,
and what the backend does with a server that refuses, fails or is absent. The faults come from a small HTTP server
of the test's, since no real server answers 429 or refuses a key on request; the backend against a real server
(vLLM's) is tests/end_to_end/test_served_model.py."""

from __future__ import annotations

import json
import socket
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from helpers.session import REPO

from safetyrepro.backends import openai_server
from safetyrepro.backends.openai_server import OpenAIServerBackend, ResponseCache, ServerError, seeds_honoured
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.model_spec import Endpoint, ModelSpec
from safetyrepro.results.grid_card import _run_models

KEY = "sk-test-0f9e8d7c6b5a"  # what a leak would show
SLOW, SLOW_SECONDS = 0, 1.0  # a status in a script: answer after SLOW_SECONDS


class Scripted(ThreadingHTTPServer):
    """Answers GET /v1/models with one model, and each POST with the next status of `statuses` (then 200 with a
    completion); counts the POSTs and keeps the Authorization headers it saw."""

    def __init__(self, statuses: list[int], models_status: int = 200, seeded: bool = True):
        self.statuses, self.models_status, self.posts, self.auth = list(statuses), models_status, 0, []
        self.seeded = seeded  # False: a text of its own each time, whatever the seed
        super().__init__(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):  # quiet
        pass

    def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.server.auth.append(self.headers.get("Authorization"))
        if self.server.models_status != 200:  # quoting the key it was given, as some servers do
            self._send(
                self.server.models_status, {"error": {"message": f"{self.headers.get('Authorization')} is no key"}}
            )
        elif self.path == "/v1/models":
            self._send(200, {"data": [{"id": "m", "owned_by": "test"}]})
        else:
            self._send(404, {})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.posts += 1
        status = self.server.statuses.pop(0) if self.server.statuses else 200
        if status == SLOW:  # answers, but later than the client waits
            time.sleep(SLOW_SECONDS)
            status = 200
        if status == 200 and body["prompt"] == "junk":
            self._send(200, {"choices": []})
        elif status == 200:
            drawn = "" if self.server.seeded else f" draw {self.server.posts}"
            self._send(200, {"choices": [{"text": f" echo {body['prompt']}{drawn}|next line"}]})
        else:
            self._send(status, {"error": {"message": "slow down"}}, {"Retry-After": "0"})


@pytest.fixture
def scripted():
    servers = []

    def start(statuses: list[int], models_status: int = 200, seeded: bool = True) -> Scripted:
        server = Scripted(statuses, models_status, seeded)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.shutdown()


def endpoint(url: str, **fields) -> Endpoint:
    return Endpoint(
        **{"url": url, "model": "m", "api": "completions", "max_in_flight": 2, "timeout_seconds": 5, "retries": 3}
        | fields
    )


@pytest.fixture(autouse=True)
def no_waiting(monkeypatch):
    monkeypatch.setattr(openai_server, "BACKOFF_SECONDS", 0.01)


def test_429_and_5xx_are_tried_again_and_every_response_is_kept(scripted, tmp_path):
    """Two 429s and a 503, then answers: the texts come back in order, cut at the stop string; the same call again
    is answered from the responses kept, sending nothing."""
    server = scripted([429, 429, 503])
    backend = OpenAIServerBackend(ModelSpec("served", "", endpoint=endpoint(server.url)), str(tmp_path))
    texts = backend.generate_seeds(["a", "b"], Decoding(0.7, 0.9, 8), [0, 1], stop=["|"])
    assert texts == {0: [" echo a", " echo b"], 1: [" echo a", " echo b"]}
    assert server.posts == 4 + 3  # four requests, three of them refused once
    again = OpenAIServerBackend(ModelSpec("served", "", endpoint=endpoint(server.url)), str(tmp_path))
    assert again.generate_seeds(["a", "b"], Decoding(0.7, 0.9, 8), [0, 1], stop=["|"]) == texts
    assert server.posts == 7 and again.sent == 0
    assert len(list((tmp_path / "served").rglob("*.json"))) == 4


def test_a_slow_server_is_waited_for_up_to_the_time_out_then_asked_again(scripted, tmp_path):
    """A request not answered within timeout_seconds is sent again (the late answer is not kept: the retry's is);
    a server slow every time fails the call in one line, keeping what it answered in time."""
    server = scripted([SLOW])
    quick = endpoint(server.url, timeout_seconds=0.3, max_in_flight=1)
    backend = OpenAIServerBackend(ModelSpec("served", "", endpoint=quick), str(tmp_path))
    assert backend.generate_seeds(["a", "b"], Decoding(0.0, 1.0, 8), [0], stop=["|"]) == {0: [" echo a", " echo b"]}
    assert server.posts == 3
    slow = scripted([200, SLOW, SLOW, SLOW, SLOW])
    backend = OpenAIServerBackend(
        ModelSpec("served", "", endpoint=endpoint(slow.url, timeout_seconds=0.3, max_in_flight=1)),
        str(tmp_path / "again"),
    )
    with pytest.raises(ServerError) as error:
        backend.generate_seeds(["a", "b"], Decoding(0.0, 1.0, 8), [0], stop=["|"])
    assert str(error.value).startswith(
        f"model 'served': a request to the server at 127.0.0.1:{slow.server_address[1]} failed 4 times; the last: ReadTimeout"
    )
    assert "\n" not in str(error.value) and len(list((tmp_path / "again").rglob("*.json"))) == 1


def test_a_request_refused_past_its_retries_fails_in_one_line(scripted, tmp_path):
    server = scripted([503] * 10)
    backend = OpenAIServerBackend(ModelSpec("served", "", endpoint=endpoint(server.url)), str(tmp_path))
    with pytest.raises(ServerError) as error:
        backend.generate_seeds(["a"], Decoding(0.0, 1.0, 8), [0])
    assert "\n" not in str(error.value) and "failed 4 times" in str(error.value) and "503" in str(error.value)
    assert server.posts == 4
    assert not list(tmp_path.rglob("*.json"))  # nothing kept of a failure


def test_a_refused_key_is_one_line_naming_its_variable_never_the_key(scripted, tmp_path, monkeypatch):
    """The key goes as a bearer token and nowhere else: a refusal that quotes it has it cut out; a key with a .env
    file's line end is sent without it; one no header can carry, and none, are one line naming the variable."""
    server = scripted([], models_status=401)
    monkeypatch.setenv("SERVED_KEY", KEY + "\r\n")
    spec = ModelSpec("served", "", endpoint=endpoint(server.url, api_key_env="SERVED_KEY"))
    with pytest.raises(ServerError) as error:
        OpenAIServerBackend(spec, str(tmp_path))
    message = str(error.value)
    assert message.startswith("the server at 127.0.0.1:") and "refused the key in SERVED_KEY (401: " in message
    assert KEY not in message and "Bearer <the key> is no key" in message and "\n" not in message
    assert server.auth == [f"Bearer {KEY}"]  # sent, as a bearer token, without the line end
    monkeypatch.setenv("SERVED_KEY", "sk-\u043a\u043b\u044e\u0447")
    with pytest.raises(ServerError, match=r"^the environment variable SERVED_KEY .*not printable ASCII") as error:
        OpenAIServerBackend(spec, str(tmp_path))
    assert "\u043a" not in str(error.value)
    monkeypatch.delenv("SERVED_KEY")
    with pytest.raises(ServerError, match="the environment variable SERVED_KEY .* is not set"):
        OpenAIServerBackend(spec, str(tmp_path))


def test_an_answer_without_a_completion_is_one_line_and_not_kept(scripted, tmp_path):
    server = scripted([])
    backend = OpenAIServerBackend(ModelSpec("served", "", endpoint=endpoint(server.url)), str(tmp_path))
    with pytest.raises(
        ServerError, match=r"^model 'served': the server at 127.0.0.1:\d+ answered without a completion$"
    ):
        backend.generate_seeds(["junk"], Decoding(0.0, 1.0, 8), [0])
    assert server.posts == 1 and not list(tmp_path.rglob("*.json"))


def test_retry_after_in_seconds_or_as_a_date():
    from email.utils import formatdate

    assert openai_server._retry_after("3") == 3.0 and openai_server._retry_after(None) == 0.0
    assert 5 < openai_server._retry_after(formatdate(time.time() + 10, usegmt=True)) <= 10
    assert openai_server._retry_after("soon") == 0.0
    assert openai_server._retry_after("999") == openai_server.BACKOFF_LIMIT


def test_no_server_is_one_line(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed
    with pytest.raises(ServerError, match=rf"^no server answers at http://127.0.0.1:{port}/v1 \(ConnectError"):
        OpenAIServerBackend(ModelSpec("served", "", endpoint=endpoint(f"http://127.0.0.1:{port}/v1")), str(tmp_path))


def test_a_model_the_server_does_not_serve_is_one_line(scripted, tmp_path):
    server = scripted([])
    with pytest.raises(ServerError, match=r"does not serve 'other' \(it serves: 'm'\)"):
        OpenAIServerBackend(ModelSpec("served", "", endpoint=endpoint(server.url, model="other")), str(tmp_path))


def test_the_cache_key_is_the_whole_request():
    body = {"model": "m", "prompt": [2, 5], "seed": 7, "temperature": 0.7}
    key = ResponseCache.key("http://h/v1", "completions", body)
    assert key == ResponseCache.key("http://h/v1", "completions", dict(reversed(body.items())))  # not the order
    for other in ({**body, "seed": 8}, {**body, "prompt": [2, 6]}, {**body, "temperature": 0.3}):
        assert ResponseCache.key("http://h/v1", "completions", other) != key
    assert ResponseCache.key("http://g/v1", "completions", body) != key
    assert ResponseCache.key("http://h/v1", "chat/completions", body) != key


def served_config(data_dir: Path, model: dict, **more) -> dict:
    return {
        "data_dir": str(data_dir),
        "models": [model, {"name": "b", "path": "org/b"}],
        "benchmarks": {"bbq": {"n_items": 5}},
        "envelope": str(REPO / "config" / "envelope.yaml"),
        **more,
    }


def test_a_served_models_config_is_checked_in_one_line(data_dir):
    """A key in the URL, and log-likelihood configs for a model that serves generation only (the chat API), are
    refused."""
    served = {"name": "s", "endpoint": {"url": "http://user:secret@127.0.0.1:8000/v1", "model": "m"}}
    with pytest.raises(ConfigError, match=r"models\[0\] \(s\)\.endpoint\.url: holds credentials") as error:
        load_settings(served_config(data_dir, served))
    assert "secret" not in str(error.value)
    served["endpoint"]["url"] = "http://127.0.0.1:abc/v1"
    with pytest.raises(ConfigError, match=r"models\[0\] \(s\)\.endpoint\.url: not a URL a client can ask \("):
        load_settings(served_config(data_dir, served))
    served["endpoint"] |= {"url": "http://127.0.0.1:8000/v1", "api": "chat"}
    with pytest.raises(ConfigError, match=r"endpoint: serves generation only \(chat API\), and the run has"):
        load_settings(served_config(data_dir, served))
    served["endpoint"]["api"] = "completions"  # without a tokenizer too: text prompts, the echo's offsets
    assert load_settings(served_config(data_dir, served)).model("s").path == ""
    freeform = [c for c in load_settings(served_config(data_dir, {"name": "a", "path": "org/a"})).configs("bbq")]
    keep = [c.config_id for c in freeform if c.scoring == "freeform"]
    settings = load_settings(served_config(data_dir, served, select_configs=keep))
    spec = settings.model("s")
    assert spec.endpoint.max_in_flight == 4 and spec.endpoint.retries == 6  # the schema's defaults
    assert settings.backend.kinds(spec) == {"generate": "openai", "loglikelihood": "openai"}
    assert settings.backend.kinds(settings.model("b")) == {"generate": "hf", "loglikelihood": "hf"}
    assert not settings.backend.uses_gpu(spec)
    with_tokenizer = {**served, "path": "org/tok", "endpoint": {**served["endpoint"], "api": "chat"}}
    with pytest.raises(ConfigError, match=r"serves generation only \(chat API\)"):
        load_settings(served_config(data_dir, with_tokenizer))
    with_tokenizer["endpoint"]["api"] = "completions"
    assert load_settings(served_config(data_dir, with_tokenizer)).model("s").path == "org/tok"


def test_a_served_model_has_no_precision_twin(data_dir):
    served = {"name": "s", "path": "org/tok", "endpoint": {"url": "http://127.0.0.1:8000/v1", "model": "m"}}
    probe = {"precision": "nf4", "configs": ["T1-greedy-0shot-freeform"]}
    settings = load_settings(served_config(data_dir, served, precision_probe=probe))
    assert settings.precision_probe.twins == {"b": "b@nf4"}
    only_served = served_config(data_dir, served, precision_probe=probe)
    only_served["models"][1] = {**served, "name": "t"}
    with pytest.raises(ConfigError, match="every model already runs at nf4 or is served"):
        load_settings(only_served)


def test_a_server_that_ignores_seeds_is_named_in_the_grid_card(scripted):
    """One sampled request sent twice: two texts mean the seed was not honoured, and the GRID card says which
    model's sampled cells would draw other texts."""
    honours, ignores = scripted([]), scripted([], seeded=False)
    assert seeds_honoured(endpoint(honours.url)) and not seeds_honoured(endpoint(ignores.url))
    server = {"host": "h:1", "model": "m", "api": "chat", "owned_by": None, "server_version": None}
    card = {
        "run": {"judges": []},
        "data": {},
        "scorer_files": {},
        "models": {
            "served": {"path": "", "precision": "bf16", "endpoint": {**server, "seeds_honoured": False}},
            "kept": {"path": "", "precision": "bf16", "endpoint": {**server, "seeds_honoured": True}},
        },
    }
    text = "\n".join(_run_models(card))
    assert "| served | served: m at h:1 (chat API, server (version not stated)); seeds NOT honoured | bf16 |" in text
    assert "seeds honoured | bf16 |" in text
    assert "served's server did not honour seeds" in text and "kept's server" not in text


def test_a_sampled_cell_of_a_server_that_ignores_seeds_says_so_in_its_log(tmp_path, caplog):
    """The cell reads its model's description (which it waits for): not honoured, a warning in the cell's log."""
    import types

    from safetyrepro.pipeline.jobs import warn_unseeded

    (tmp_path / "models").mkdir()
    settings = types.SimpleNamespace(results_dir=tmp_path)
    for name, honoured in (("ignores", False), ("honours", True)):
        (tmp_path / "models" / f"{name}.json").write_text(json.dumps({"endpoint": {"seeds_honoured": honoured}}))
        warn_unseeded(settings, types.SimpleNamespace(name=name))
    assert [r.getMessage() for r in caplog.records if r.levelname == "WARNING"] == [
        f"model ignores's server did not honour seeds ({tmp_path / 'models' / 'ignores.json'}): this sampled cell's "
        "texts are those this run kept, and a server asked again would draw others"
    ]


def test_an_echo_is_read_only_when_it_holds_the_whole_prompt():
    """vLLM echoes every prompt token (the first without a log-probability) and then the token it generated; a
    server that leaves the first token out would have the continuation read one position off: not read at all."""
    whole = {
        "choices": [{"logprobs": {"token_logprobs": [None, -1.0, -2.0, -3.0, -0.5]}}],
        "usage": {"completion_tokens": 1},
    }
    assert openai_server.prompt_logprobs(whole, 4) == [None, -1.0, -2.0, -3.0]
    short = {"choices": [{"logprobs": {"token_logprobs": [None, -2.0, -3.0, -0.5]}}], "usage": {"completion_tokens": 1}}
    assert openai_server.prompt_logprobs(short, 4) is None
    gap = {"choices": [{"logprobs": {"token_logprobs": [None, None, -3.0, -0.5, -0.1]}}]}
    assert openai_server.prompt_logprobs(gap, 4) is None


def _echo(tokens: list[str], logprobs: list) -> dict:
    """An echoed text prompt as llama.cpp's server answers it (its BOS left out, the first token without a
    log-probability, the generated token last), the offsets counted from the tokens' texts."""
    offsets = [sum(len(t) for t in tokens[:i]) for i in range(len(tokens))]
    return {
        "choices": [
            {
                "text": "".join(tokens),
                "logprobs": {"text_offset": offsets, "tokens": tokens, "token_logprobs": logprobs},
            }
        ]
    }


def test_without_a_tokenizer_the_continuations_tokens_are_those_that_spell_it():
    """Without the model's tokenizer the prompt goes as text: the continuation's log-probabilities are those of the
    echoed tokens whose texts spell it, after a leading token of the server's own (vLLM's "<bos>"); a token spanning
    the context's end, texts that are not the prompt's (a space the tokenizer adds: offsets counted from them would
    be one off), an echo that stops short or a log-probability that is no number is one line, never a sum over
    other tokens."""
    tokens = ["Q", ":", " Is", " it", "?", "\n", "A", ":", " Yes", ",", " it", " is"]
    values = [None, -0.1, -4.0, -2.0, -0.6, -0.4, -0.3, -0.1, -1.8, -0.7, -0.2, -3.0]
    context = "Q: Is it?\nA:"
    assert openai_server.continuation_logprobs(_echo(tokens, values), context, " Yes, it") == [-1.8, -0.7, -0.2]
    with_bos = _echo(["<bos>", *tokens], [None, None, *values[1:]])
    assert openai_server.continuation_logprobs(with_bos, context, " Yes, it") == [-1.8, -0.7, -0.2]
    with pytest.raises(ValueError, match=r"do not split where the continuation 'es, it' starts"):
        openai_server.continuation_logprobs(_echo(tokens, values), context + " Y", "es, it")
    spaced = _echo([" Q", *tokens[1:]], values)
    with pytest.raises(ValueError, match=r"^the server's echoed tokens do not spell the prompt \(' Q: Is it"):
        openai_server.continuation_logprobs(spaced, context, " Yes, it")
    with pytest.raises(ValueError, match="do not spell the prompt"):  # the echo stops short
        openai_server.continuation_logprobs(_echo(tokens, values), context, " Yes, it is, surely")
    with pytest.raises(ValueError, match="no finite log-probability"):
        openai_server.continuation_logprobs(
            _echo(tokens, [*values[:9], float("nan"), *values[10:]]), context, " Yes, it"
        )
    with pytest.raises(ValueError, match="empty continuation"):
        openai_server.continuation_logprobs(_echo(tokens, values), context, "")
    untexted = {"choices": [{"text": "x", "logprobs": {"tokens": [*tokens[:-1], None], "token_logprobs": values}}]}
    assert openai_server.echoed_text(untexted) is None  # a token without its text
    no_tokens = {"choices": [{"text": "x", "logprobs": {"token_logprobs": values}}]}
    assert openai_server.echoed_text(no_tokens) is None


def test_a_log_likelihood_without_a_tokenizer_sends_text_and_is_kept(tmp_path, monkeypatch):
    """The request is the context and continuation as one text, echoed with log-probabilities; the response is
    kept under that request, and asked again nothing is sent."""
    bodies = []
    answer = _echo(["Q", ":", " Yes", "!"], [None, -0.5, -1.25, -0.1])

    def post(self, path, json):
        bodies.append((path, json))
        return types.SimpleNamespace(status_code=200, json=lambda: answer, text="")

    monkeypatch.setattr(openai_server, "check_server", lambda endpoint: {"server_version": None})
    monkeypatch.setattr("httpx.Client.post", post)
    spec = ModelSpec("served", "", endpoint=endpoint("http://127.0.0.1:9/v1"))
    backend = OpenAIServerBackend(spec, str(tmp_path))
    assert backend.loglikelihood([("Q:", " Yes")]) == [-1.25]
    assert bodies == [
        (
            "completions",
            {"model": "m", "prompt": "Q: Yes", "max_tokens": 1, "temperature": 0.0, "echo": True, "logprobs": 0},
        )
    ]
    assert OpenAIServerBackend(spec, str(tmp_path)).loglikelihood([("Q:", " Yes")]) == [-1.25] and len(bodies) == 1
