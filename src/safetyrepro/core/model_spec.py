"""A model of the grid, as the config names it."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

CHAT_TEMPLATE_WORDS = ("auto", "on", "off")  # a model's chat_template: one of these, or a Jinja file's path
SERVED_BY = "openai"  # the backend (registered in pyproject.toml) that talks to a model's `endpoint`


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible server a model is reached through (the config's `endpoint`): its base URL, the model's
    name there, which API the prompts go through, the environment variable holding its key (never the key), and how
    hard to press it (the defaults are the config schema's)."""

    url: str
    model: str
    api: str
    max_in_flight: int
    timeout_seconds: float
    retries: int
    api_key_env: str | None = None
    requests_per_minute: float | None = None

    def host(self) -> str:
        """The server's host and port, as the GRID card and messages name it (no path, no credentials)."""
        parts = urlsplit(self.url)
        host = f"[{parts.hostname}]" if ":" in (parts.hostname or "") else parts.hostname
        return f"{host}{f':{parts.port}' if parts.port else ''}"


@dataclass(frozen=True)
class ModelSpec:
    """A model of the grid: a name, where its weights are (a served model: its tokenizer, or ""), how to load them,
    the server that serves it (`endpoint`), if one does, and the GPUs the offline vLLM engine splits it over
    (`parallel`: tensor x pipeline)."""

    name: str
    path: str
    precision: str = "bf16"
    chat_template: str = "auto"
    trust_remote_code: bool = False
    revision: str | None = None
    embedded: str | None = None
    endpoint: Endpoint | None = None
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    chat_template_sha256: str | None = None  # a chat template file's text as the config was loaded (it decides prompts)

    def template_file(self) -> Path | None:
        """The Jinja chat template file used in place of the tokenizer's, or None (chat_template auto, on, off)."""
        return None if self.chat_template in CHAT_TEMPLATE_WORDS else Path(self.chat_template)

    def gpus(self) -> int:
        """The GPUs one server of the model holds where it needs any: tensor x pipeline parallel."""
        return self.tensor_parallel * self.pipeline_parallel

    def record(self) -> dict:
        """The spec as plain data, for fingerprints and keys: of its endpoint, what decides the answers (the URL, the
        served name, the API), not how hard the server is pressed or which variable holds the key (a model of
        weights has the fields it had before endpoints were, and its parallel sizes only where it is split, so its cells'
        fingerprints stay as they were)."""
        record = asdict(self)
        if self.chat_template_sha256 is None:
            del record["chat_template_sha256"]
        if self.gpus() == 1:
            del record["tensor_parallel"], record["pipeline_parallel"]
        if self.endpoint is None:
            del record["endpoint"]
        else:
            record["endpoint"] = {key: record["endpoint"][key] for key in ("url", "model", "api")}
        return record

    def weights(self) -> tuple:
        """What makes two entries the same model at any precision: its files (a local folder by its real path),
        revision, prompts; a served model's weights are its server's (its URL and served name), whatever its
        tokenizer."""
        if self.endpoint is not None:
            return "served", self.endpoint.url, self.endpoint.model
        path = os.path.realpath(self.path) if os.path.isdir(self.path) else self.path
        return path, self.revision, self.chat_template, self.trust_remote_code
