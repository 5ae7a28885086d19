"""Extract the part of vLLM's API that safetyrepro.backends.vllm calls, from the wheels' source,
without importing them (vLLM needs a GPU machine), into tests/data/vllm_api.json.

The test stand-in for `vllm` (tests/test_backend_vllm.py) rejects any argument outside this
snapshot, so the backend is checked against vLLM as it is, not against a module that takes anything.

Usage:
    pip download --no-deps vllm==0.33.0 vllm-bnb-plugin==0.0.3 -d wheels/
    python scripts/vllm_api_snapshot.py wheels/vllm-0.33.0-*.whl wheels/vllm_bnb_plugin-0.0.3-*.whl
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "tests" / "data" / "vllm_api.json"


def _module(wheel: zipfile.ZipFile, path: str) -> ast.Module:
    return ast.parse(wheel.read(path).decode(), filename=path)


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == name)


def _method_params(cls: ast.ClassDef, name: str) -> list[str]:
    """Parameter names of a method (without self), keyword-only ones included."""
    method = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)
    args = method.args
    return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs] if a.arg != "self"]


def _fields(cls: ast.ClassDef) -> list[str]:
    """Annotated class attributes (dataclass / msgspec / TypedDict fields), public ones only."""
    return [
        n.target.id
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and not n.target.id.startswith("_")
    ]


def _literal(tree: ast.Module, name: str) -> list[str]:
    """The string values of a module-level `Name = Literal[...]`."""
    node = next(
        n for n in tree.body if isinstance(n, ast.Assign) and any(getattr(t, "id", None) == name for t in n.targets)
    )
    return [e.value for e in ast.walk(node.value) if isinstance(e, ast.Constant) and isinstance(e.value, str)]


def _top_level_names(tree: ast.Module) -> list[str]:
    """Functions, classes and assigned names of a module."""
    names = [n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)]
    names += [t.id for n in tree.body if isinstance(n, ast.Assign | ast.AnnAssign) for t in _targets(n)]
    return sorted(set(names))


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.Name]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [t for t in targets if isinstance(t, ast.Name)]


def _self_attributes(cls: ast.ClassDef) -> list[str]:
    """Attributes a class sets on `self` anywhere in its methods."""
    return sorted(
        {
            t.attr
            for n in ast.walk(cls)
            if isinstance(n, ast.Assign | ast.AnnAssign)
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
            if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
        }
    )


def snapshot(vllm_wheel: Path, plugin_wheel: Path) -> dict:
    with zipfile.ZipFile(vllm_wheel) as wheel:
        version = re.search(r"^Version: (\S+)$", wheel.read(_dist_info(wheel) + "/METADATA").decode(), re.M).group(1)
        llm = _class(_module(wheel, "vllm/entrypoints/llm.py"), "LLM")
        engine_args = _class(_module(wheel, "vllm/engine/arg_utils.py"), "EngineArgs")
        sampling = _class(_module(wheel, "vllm/sampling_params.py"), "SamplingParams")
        tokens_prompt = _class(_module(wheel, "vllm/inputs/llm.py"), "TokensPrompt")
        quantization = _literal(
            _module(wheel, "vllm/model_executor/layers/quantization/__init__.py"), "QuantizationMethods"
        )
        tokenizer_modes = _literal(_module(wheel, "vllm/config/model.py"), "TokenizerMode")
        plugins = _top_level_names(_module(wheel, "vllm/plugins/__init__.py"))
        quantization_names = _top_level_names(_module(wheel, "vllm/model_executor/layers/quantization/__init__.py"))
        engine = _class(_module(wheel, "vllm/v1/engine/llm_engine.py"), "LLMEngine")
        core_client = _class(_module(wheel, "vllm/v1/engine/core_client.py"), "EngineCoreClient")
        outputs = _module(wheel, "vllm/outputs.py")
        request_output, completion_output = _class(outputs, "RequestOutput"), _class(outputs, "CompletionOutput")
    with zipfile.ZipFile(plugin_wheel) as wheel:
        plugin_version = re.search(r"^Version: (\S+)$", wheel.read(_dist_info(wheel) + "/METADATA").decode(), re.M)
        source = wheel.read("vllm_bnb_plugin/__init__.py").decode()
        plugin_methods = re.findall(r'register_quantization_config\("([^"]+)"\)', source)
        entry_points = wheel.read(_dist_info(wheel) + "/entry_points.txt").decode()
    return {
        "vllm": version,
        "vllm_bnb_plugin": plugin_version.group(1),
        "LLM.__init__": _method_params(llm, "__init__"),
        "EngineArgs": _fields(engine_args),
        "LLM.generate": _method_params(llm, "generate"),
        "LLM.get_tokenizer": _method_params(llm, "get_tokenizer"),
        "SamplingParams": _fields(sampling),
        "TokensPrompt": sorted({*_fields(tokens_prompt), "prompt_token_ids"}),
        "quantization": quantization,
        "quantization_with_plugin": plugin_methods,
        "plugin_entry_point": "[vllm.general_plugins]" in entry_points,
        "tokenizer_modes": tokenizer_modes,
        "LLM.attributes": _self_attributes(llm),
        "LLMEngine.attributes": _self_attributes(engine),
        "EngineCoreClient.shutdown": _method_params(core_client, "shutdown"),
        "RequestOutput": _method_params(request_output, "__init__"),
        "CompletionOutput": _fields(completion_output),
        "vllm.plugins": plugins,
        "vllm.model_executor.layers.quantization": quantization_names,
    }


def _dist_info(wheel: zipfile.ZipFile) -> str:
    return next(name.split("/")[0] for name in wheel.namelist() if name.split("/")[0].endswith(".dist-info"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vllm_wheel", type=Path)
    parser.add_argument("plugin_wheel", type=Path)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data = snapshot(args.vllm_wheel, args.plugin_wheel)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}: vLLM {data['vllm']}, plugin {data['vllm_bnb_plugin']}")


if __name__ == "__main__":
    main()
