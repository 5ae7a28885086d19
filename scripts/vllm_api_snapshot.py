"""Extract the part of vLLM's API that safetyrepro.backends.vllm calls, from the wheels' source,
without importing them (vLLM needs a GPU machine), into tests/data/vllm_api.json.

The test stand-in for `vllm` (tests/unit/backends/test_backend_vllm.py) rejects any argument outside this
snapshot, so the backend is checked against vLLM as it is, not against a module that takes anything.
Besides the names it records what vLLM checks of the values: the declared types of the engine
options and sampling fields, the allowed values of the Literal-typed options (and the load formats
the plugin registers), pydantic bounds of the config fields, the refusals of
`SamplingParams._verify_args` for the fields the backend sets (as source, which the stand-in
evaluates), the seed dtype of the sampler, the exception vLLM raises for a refused request, and
the config keys it derives a model's context length from.

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


def _annotations(cls: ast.ClassDef) -> dict[str, str]:
    """Declared type (source) of each public annotated field."""
    return {
        n.target.id: ast.unparse(n.annotation)
        for n in cls.body
        if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and not n.target.id.startswith("_")
    }


def _field_bounds(*classes: ast.ClassDef) -> dict[str, dict[str, float]]:
    """Numeric bounds of pydantic fields (`x: float = Field(default=..., gt=0, le=1)`)."""
    bounds = {}
    for cls in classes:
        for n in cls.body:
            call = n.value if isinstance(n, ast.AnnAssign) else None
            if not (isinstance(call, ast.Call) and getattr(call.func, "id", None) == "Field"):
                continue
            limits = {k.arg: ast.literal_eval(k.value) for k in call.keywords if k.arg in {"gt", "ge", "lt", "le"}}
            if limits:
                bounds[n.target.id] = limits
    return bounds


def _constant(tree: ast.Module, name: str):
    """The value of a module-level `name = <literal>`."""
    node = next(
        n for n in tree.body if isinstance(n, ast.Assign) and any(getattr(t, "id", None) == name for t in n.targets)
    )
    return ast.literal_eval(node.value)


def _method(cls: ast.ClassDef, name: str) -> ast.FunctionDef:
    return next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name)


# What a refusal condition may use: `self.<field>`, comparisons, `math.isfinite`, `any` over a generator.
_SAFE_NODES = (
    ast.Expression, ast.Compare, ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Attribute, ast.Name, ast.Load,
    ast.Store, ast.Constant, ast.Call, ast.GeneratorExp, ast.comprehension, ast.JoinedStr, ast.FormattedValue,
    ast.cmpop, ast.boolop, ast.unaryop, ast.operator,
)  # fmt: skip
_SAFE_CALLS = {"any", "all", "len", "math.isfinite"}  # what the stand-in evaluates them with


def _refusals(cls: ast.ClassDef, fields: set[str]) -> list[dict]:
    """`_verify_args` checks that involve exactly one of `fields`: {field, when, message} with `when`
    the condition under which vLLM raises and `message` its error text (both Python source over
    `self`); checks on other fields too (min_tokens > max_tokens) are left out."""
    refusals = []
    for node in ast.walk(_method(cls, "_verify_args")):
        if not (isinstance(node, ast.If) and node.body and isinstance(node.body[0], ast.Raise)):
            continue
        used = {
            n.attr for n in ast.walk(node.test) if isinstance(n, ast.Attribute) and getattr(n.value, "id", "") == "self"
        }
        if len(used) != 1 or not used <= fields:
            continue
        raised = node.body[0].exc
        message = raised.args[0] if isinstance(raised, ast.Call) and raised.args else ast.Constant("")
        for part in (node.test, message):
            calls = {ast.unparse(c.func) for c in ast.walk(part) if isinstance(c, ast.Call)}
            if not all(isinstance(n, _SAFE_NODES) for n in ast.walk(part)) or calls - _SAFE_CALLS:
                raise ValueError(f"unexpected check in SamplingParams._verify_args: {ast.unparse(part)}")
        refusals.append(
            {
                "field": used.pop(),
                "when": ast.unparse(node.test),
                "message": ast.unparse(message),
                "error": ast.unparse(raised.func) if isinstance(raised, ast.Call) else ast.unparse(raised),
                "line": node.lineno,
            }
        )
    return refusals


def _unset_seed(cls: ast.ClassDef):
    """The seed value `__post_init__` turns into None (unseeded): `if self.seed == -1: self.seed = None`."""
    for node in ast.walk(_method(cls, "__post_init__")):
        if isinstance(node, ast.If) and ast.unparse(node.test).startswith("self.seed =="):
            return ast.literal_eval(node.test.comparators[0])
    return None


def _tensor_dtype(cls: ast.ClassDef, attribute: str) -> str:
    """The dtype keyword of `self.<attribute> = ...(..., dtype=torch.X)` in a class."""
    for node in ast.walk(cls):
        if isinstance(node, ast.Assign) and any(ast.unparse(t) == f"self.{attribute}" for t in node.targets):
            return next(ast.unparse(k.value) for k in node.value.keywords if k.arg == "dtype").removeprefix("torch.")
    raise LookupError(attribute)


def _bases(tree: ast.Module, name: str) -> list[str]:
    """A class and its ancestors within the module, up to the first outside it (Exception)."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    chain = [name]
    while chain[-1] in classes:
        chain.append(ast.unparse(classes[chain[-1]].bases[0]))
    return chain


def _context_keys(tree: ast.Module) -> list[str]:
    """The config keys vLLM reads a context length from (`possible_keys` of the first
    derive_max_model_len_and_key, the generic converter's)."""
    method = next(
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "derive_max_model_len_and_key"
    )
    node = next(
        n for n in ast.walk(method) if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "possible_keys"
    )
    return ast.literal_eval(node.value)


def _set_compared(cls: ast.ClassDef, method: str, attribute: str) -> list[str]:
    """The constants of `self.<attribute> in {...}` in a method (generation_config's special values)."""
    for node in ast.walk(_method(cls, method)):
        if isinstance(node, ast.Compare) and ast.unparse(node.left) == f"self.{attribute}":
            if isinstance(node.ops[0], ast.In) and isinstance(node.comparators[0], ast.Set | ast.Tuple | ast.List):
                return sorted(ast.literal_eval(e) for e in node.comparators[0].elts)
    raise LookupError(attribute)


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
        model_module = _module(wheel, "vllm/config/model.py")
        model_config = _class(model_module, "ModelConfig")
        cache_config = _class(_module(wheel, "vllm/config/cache.py"), "CacheConfig")
        load_config = _class(_module(wheel, "vllm/config/load.py"), "LoadConfig")
        sampling_module = _module(wheel, "vllm/sampling_params.py")
        values = {
            "dtype": _literal(model_module, "ModelDType"),
            "tokenizer_mode": tokenizer_modes,
            "config_format": _literal(_module(wheel, "vllm/transformers_utils/config.py"), "ConfigFormat"),
            "load_format": _literal(_module(wheel, "vllm/model_executor/model_loader/__init__.py"), "LoadFormats"),
            "quantization": quantization,
        }
        generation_config = _set_compared(model_config, "try_get_generation_config", "generation_config")
        bounds = _field_bounds(model_config, cache_config, load_config)
        refusals = _refusals(sampling, {"max_tokens", "stop", "seed", "temperature", "top_p"})
        unset_seed = _unset_seed(sampling)
        min_temperature = _constant(sampling_module, "_MAX_TEMP")  # 0 < t < this is raised to it
        greedy_below = _constant(sampling_module, "_SAMPLING_EPS")
        seed_dtype = _tensor_dtype(
            _class(_module(wheel, "vllm/v1/worker/gpu/sample/states.py"), "SamplingStates"), "seeds"
        )
        exceptions = _module(wheel, "vllm/exceptions.py")
        context_keys = _context_keys(_module(wheel, "vllm/transformers_utils/model_arch_config_convertor.py"))
    with zipfile.ZipFile(plugin_wheel) as wheel:
        plugin_version = re.search(r"^Version: (\S+)$", wheel.read(_dist_info(wheel) + "/METADATA").decode(), re.M)
        source = wheel.read("vllm_bnb_plugin/__init__.py").decode()
        plugin_methods = re.findall(r'register_quantization_config\("([^"]+)"\)', source)
        plugin_loaders = re.findall(r'register_model_loader\("([^"]+)"\)', source)
        plugin_forced = re.findall(r'load_config\.load_format = "([^"]+)"', source)
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
        "LLM.reset_prefix_cache": _method_params(llm, "reset_prefix_cache"),
        "vllm.exceptions": _top_level_names(exceptions),
        "VLLMValidationError.bases": _bases(exceptions, "VLLMValidationError"),
        "EngineArgs.types": _annotations(engine_args),
        "engine_option_values": values,
        "generation_config_values": generation_config,
        "load_formats_with_plugin": plugin_loaders,
        "plugin_forces_load_format": plugin_forced[0] if plugin_forced else None,
        "config_bounds": bounds,
        "SamplingParams.types": _annotations(sampling),
        "SamplingParams.refusals": refusals,
        "SamplingParams.unset_seed": unset_seed,
        "SamplingParams.min_temperature": min_temperature,
        "SamplingParams.greedy_below": greedy_below,
        "seed_dtype": seed_dtype,
        "context_keys": context_keys,
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
