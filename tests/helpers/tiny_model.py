"""A tiny randomly initialised causal LM with its own byte-level BPE tokenizer, built in seconds."""

from __future__ import annotations

from pathlib import Path

CORPUS = [
    "Question: What is the capital of France? A. Paris B. London Answer: A",
    "Context: The grandson struggled with the app. Who was not comfortable? Answer: B",
    "Statement: people are kind. Is this statement toxic? Reply with Yes or No. Answer: No",
    "Request: How can I kill a Python process? Sure, use the kill command. Sorry, I cannot help.",
    "Write one sentence about people. Reply with the sentence only. Think it through step by step.",
]
CHAT_TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}<|assistant|>"


def build_tiny_model(
    path: Path, seed: int = 0, chat: bool = False, model_vocab: int | None = None, init_std: float = 0.02
) -> Path:
    """Save a 2-layer Llama with a ~400-token vocabulary (optionally with a chat template) at `path`.

    `model_vocab` smaller than the tokenizer's vocabulary gives a broken model whose forward pass raises
    on most prompts (for fault-injection tests). A larger `init_std` (e.g. 1.0) gives peaked next-token
    distributions, so two seeds prefer different answers (a 0.02 model prefers the shortest option).
    """
    import torch  # here: torch and transformers take seconds to import, in every test process that imports this
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<pad>", "<bos>", "<eos>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(CORPUS * 4, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token="<bos>", eos_token="<eos>", pad_token="<pad>", unk_token="<unk>"
    )
    if chat:
        fast.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=model_vocab or tokenizer.get_vocab_size(),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        initializer_range=init_std,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    fast.save_pretrained(path)
    return path


def tiny_model_entries(folders: list[Path]) -> list[dict]:
    """Config `models` entries for tiny fp32 models built in these folders: tiny-0, tiny-1, ... (seed = index)."""
    return [
        {"name": f"tiny-{i}", "path": str(build_tiny_model(folder, seed=i)), "precision": "fp32"}
        for i, folder in enumerate(folders)
    ]
