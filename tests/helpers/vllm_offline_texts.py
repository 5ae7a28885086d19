"""The offline vLLM backend's texts for some cells of the default run, for tests/end_to_end/test_served_model.py to
compare with the same model behind vLLM's server. Runs under the vLLM environment:

    .venv-vllm/bin/python tests/helpers/vllm_offline_texts.py --model DIR --config CONFIG --out texts.json

CONFIG is the run's config (its benchmarks, items and configs); every free-form config of every benchmark is one
cell, its prompts rendered by the pipeline. Writes each cell's prompts, decoding, seeds, stop strings and texts,
and the seconds each cell took.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # run as a script under .venv-vllm: no helpers package on its path
sys.path.insert(0, str(REPO / "tests" / "helpers"))

from vllm_engine_probe import prompts_of  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    from safetyrepro.backends.vllm import VLLMBackend
    from safetyrepro.configuration.build import load_settings
    from safetyrepro.core.model_spec import ModelSpec

    settings = load_settings(args.config)
    spec = ModelSpec("offline", args.model, "fp32")
    engine = VLLMBackend(spec, kv_cache_gib=1, max_new_tokens=settings.longest_generation())
    cells = []
    for benchmark in settings.benchmarks:
        for config in settings.configs(benchmark):
            if config.scoring != "freeform":
                continue
            prompts, decoding, seeds, stop = prompts_of(settings, benchmark, config.config_id)
            started = time.perf_counter()
            texts = engine.generate_seeds(prompts, decoding, seeds, stop)
            cells.append(
                {
                    "benchmark": benchmark,
                    "config_id": config.config_id,
                    "prompts": prompts,
                    "decoding": vars(decoding),
                    "seeds": seeds,
                    "stop": stop,
                    "texts": {str(seed): texts[seed] for seed in seeds},
                    "seconds": time.perf_counter() - started,
                }
            )
    engine.close()
    Path(args.out).write_text(json.dumps({"cells": cells}))


if __name__ == "__main__":
    main()
