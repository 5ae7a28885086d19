"""Runs the HF backend and a real vLLM engine side by side on gemma-3-270m and writes what each did,
for tests/helpers/vllm_engine_checks.py to check. Runs under the vLLM environment (.venv-vllm/bin/python),
where both backends import; one precision per run:

    .venv-vllm/bin/python tests/helpers/vllm_engine_probe.py --model DIR --precision fp32 --out probe.json

DIR is a copy of the embedded model with a chat template and another EOS in its tokenizer than in
its generation_config (as Yi-1.5's chat model has; tests/helpers/vllm_engine_checks.py makes it).
Plain prompts are the same model with `chat_template: off`. Prompts are the shipped benchmarks'
own, rendered by the pipeline (config/config.yaml, the default run's item subsets).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # run as a script under .venv-vllm: no helpers package on its path
GREEDY = ("T1-greedy-0shot-freeform", "T1-greedy-3shot-freeform")
SAMPLED = "T3-t0.7-0shot-freeform"
GREEDY_BY_FORMAT = {"plain": GREEDY, "chat": GREEDY[:1]}  # the greedy configs asked in each prompt format
FREEFORM = ("truthfulqa", "bbq", "toxigen", "xstest")


def prompts_of(settings, benchmark: str, config_id: str) -> tuple[list[str], object, list[int], list[str]]:
    """A cell's prompts as the pipeline renders them, with its decoding, seeds and stop strings."""
    from safetyrepro.configuration.settings import item_set
    from safetyrepro.running.prompts import draw_shots, render_prompt

    envelope = settings.envelope
    config = settings.config(benchmark, config_id)
    data = item_set(settings, benchmark, envelope.presentation(config, benchmark))
    prompts = [
        render_prompt(envelope, config, data.benchmark, item, draw_shots(envelope, config, data.pool, item))
        for item in data.items
    ]
    return prompts, envelope.decoding(config), envelope.seeds_for(config), envelope.stop_strings(config)


def log(message: str, started: float = time.perf_counter()) -> None:
    print(f"[{time.perf_counter() - started:7.1f} s] {message}", file=sys.stderr, flush=True)


def first_divergence(hf_model, tokenizer, ids: list[int], theirs: list[int], hf_text: str) -> dict:
    """Where the HF backend's text leaves vLLM's tokens: the first vLLM token whose decoded prefix is
    no longer the start of the HF text, with the HF model's log-probabilities (one sequence, teacher
    forced on the tokens before it) of that token and of the likeliest other token."""
    import torch

    position = 0
    while position < len(theirs) and hf_text.startswith(tokenizer.decode(theirs[: position + 1])):
        position += 1
    position = min(position, len(theirs) - 1)
    with torch.inference_mode():
        logits = hf_model(input_ids=torch.tensor([ids + theirs[:position]])).logits[0, -1].float()
    logprobs = torch.log_softmax(logits, dim=-1)
    token = theirs[position]
    others = logprobs.clone()
    others[token] = -float("inf")
    other = int(others.argmax())
    return {
        "position": position,
        "vllm_token": tokenizer.decode([token]),
        "other_token": tokenizer.decode([other]),
        "logprob_vllm_token": round(logprobs[token].item(), 4),
        "logprob_other_token": round(logprobs[other].item(), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--precision", choices=["fp32", "bf16"], required=True)
    parser.add_argument("--items", type=int, default=7, help="items per benchmark (x 4 benchmarks x 3 greedy cells)")
    parser.add_argument("--alone", type=int, default=3, help="prompts whose sampled texts are also drawn alone")
    parser.add_argument("--restart", action="store_true", help="also rerun the sampled cell on a second engine")
    parser.add_argument("--long-prompt", action="store_true", help="also a prompt over the context, on both")
    parser.add_argument(
        "--formats", nargs="+", choices=GREEDY_BY_FORMAT, default=list(GREEDY_BY_FORMAT), help="prompt formats, greedy"
    )
    parser.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    from safetyrepro.backends.hf import HFBackend
    from safetyrepro.backends.prompt_ids import request_seed
    from safetyrepro.backends.vllm import VLLMBackend
    from safetyrepro.configuration.build import load_settings
    from safetyrepro.core.model_spec import ModelSpec

    settings = load_settings(
        REPO / "config" / "config.yaml",
        {
            "data_dir": args.data_dir,
            "benchmarks": {"crows_pairs": None, **{b: {"n_items": args.items} for b in FREEFORM}},
        },
    )
    spec = ModelSpec("probe", args.model, args.precision)
    report: dict = {"precision": args.precision, "timings": {}}
    started = time.perf_counter()
    hf = HFBackend(spec, batch_size=16, device="cpu")
    report["timings"]["hf_load_s"] = round(time.perf_counter() - started, 1)
    started = time.perf_counter()
    vllm = VLLMBackend(spec, kv_cache_gib=1, max_new_tokens=settings.longest_generation())
    report["timings"]["vllm_load_s"] = round(time.perf_counter() - started, 1)
    report["eos"] = {"tokenizer": hf.tokenizer.eos_token, "stop_ids": hf.model.generation_config.eos_token_id}

    def view(backend, fmt: str):
        """The backend with chat or plain prompts (what `chat_template: off` changes), sharing its model."""
        other = copy.copy(backend)
        other.prompt_format = fmt
        return other

    # what the backend's engine calls for a cell returned (its token ids, finish reasons, vLLM's own text)
    engine_calls = []
    engine_generate = vllm.engine.generate

    def recorded_generate(*args, **kwargs):
        outputs = engine_generate(*args, **kwargs)
        engine_calls.append(outputs)
        return outputs

    vllm.engine.generate = recorded_generate

    # token ids, greedy texts, stops, vLLM's own text, on the benchmarks' greedy cells, in each format asked
    greedy = []
    for fmt in args.formats:
        configs = GREEDY_BY_FORMAT[fmt]
        ours, theirs = view(hf, fmt), view(vllm, fmt)
        for benchmark in FREEFORM:
            for config_id in configs:
                log(f"greedy {fmt} {benchmark} {config_id}")
                prompts, decoding, seeds, stop = prompts_of(settings, benchmark, config_id)
                ids = [ours.encode_prompt(p) for p in prompts]
                hf_texts = ours.generate_seeds(prompts, decoding, seeds, stop)[seeds[0]]
                engine_calls.clear()
                vllm_texts = theirs.generate_seeds(prompts, decoding, seeds, stop)[seeds[0]]
                calls = [len(outputs) for outputs in engine_calls]  # the cell's engine calls, each's requests
                raw = engine_calls[-1][: len(prompts)]  # requests go seed by seed: the first seed's first
                for prompt_ids, hf_text, vllm_text, output in zip(ids, hf_texts, vllm_texts, raw):
                    row = {
                        "format": fmt,
                        "benchmark": benchmark,
                        "config_id": config_id,
                        "ids_equal": list(output.prompt_token_ids) == prompt_ids,
                        "hf": hf_text,
                        "vllm": vllm_text,
                        "vllm_own_text": output.outputs[0].text,
                        "engine_calls": calls,
                        "requests": len(prompts) * len(seeds),
                        "finish": output.outputs[0].finish_reason,
                        "last_token": output.outputs[0].token_ids[-1] if output.outputs[0].token_ids else None,
                    }
                    if hf_text != vllm_text:
                        row["divergence"] = first_divergence(
                            hf.model, hf.tokenizer, prompt_ids, list(output.outputs[0].token_ids), hf_text
                        )
                    greedy.append(row)
    report["greedy"] = greedy
    del vllm.engine.generate  # the engine's own method again; the views let go of the engine
    del ours, theirs

    # sampled: one call of every item and seed; each request alone; after other cells, in another order
    prompts, decoding, seeds, stop = prompts_of(settings, "truthfulqa", SAMPLED)
    log("sampled")
    together = vllm.generate_seeds(prompts, decoding, seeds, stop)
    alone = {
        seed: [vllm.generate_seeds([p], decoding, [seed], stop)[seed][0] for p in prompts[: args.alone]]
        for seed in seeds
    }
    log("sampled: after other cells")
    other_prompt = prompts_of(settings, "bbq", SAMPLED)[0][:1]  # another cell's item: its five requests go first
    vllm.generate_seeds(other_prompt, decoding, seeds, stop)  # the engine has served another cell first
    reordered = vllm.generate_seeds(other_prompt + prompts[::-1], decoding, seeds[::-1], stop)
    reordered = {seed: texts[1:][::-1] for seed, texts in reordered.items()}
    sampled = {
        "seeds": seeds,
        "together": together,
        "alone": alone,
        "after_other_cells_reordered": reordered,
        "request_seeds": [[request_seed(s, vllm.encode_prompt(p)) for p in prompts] for s in seeds],
    }
    if args.restart:
        log("second engine")
        vllm.close()
        second = VLLMBackend(spec, kv_cache_gib=1, max_new_tokens=settings.longest_generation())
        sampled["second_engine"] = second.generate_seeds(prompts, decoding, seeds, stop)
        vllm = second
    report["sampled"] = sampled

    if args.long_prompt:
        log("long prompt")
        # a prompt longer than the model's context, and the limit both backends cut to
        long_prompt = "Question: " + "why is the sky blue? " * 2000 + "Answer:"
        _, decoding, seeds, stop = prompts_of(settings, "truthfulqa", GREEDY[0])
        report["long_prompt"] = {
            "tokens": len(hf.encode_prompt(long_prompt)),
            "hf": hf.generate([long_prompt], decoding, seeds[0], stop),
            "vllm": vllm.generate([long_prompt], decoding, seeds[0], stop),
            "context": vllm.context,
            "max_model_len": vllm.engine.llm_engine.model_config.max_model_len,
        }
    vllm.close()
    Path(args.out).write_text(json.dumps(report, indent=1))


if __name__ == "__main__":  # vLLM spawns its workers: the module must not run again in them
    main()
