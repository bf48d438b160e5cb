"""Build a tiny Llama and its tokenizer for vLLM on CPU, with nothing from a hub.

``python vllm_model.py DIR``: a 2-layer Llama (hidden 256, 4 heads, head_dim 64) with random
weights, and a byte-level BPE tokenizer trained here on a few lines of text, with bos/eos/pad
tokens and a chat template; about 6 MB, written in about 10 s. Idempotent: a DIR that already
holds ``config.json`` and ``tokenizer.json`` is kept (one build serves a whole test session).
"""

from __future__ import annotations

import os
import sys

TEXT = [
    "the engine waits for the next request and the scheduler runs the batch",
    "a worker computes the forward pass and the detokenizer streams the tokens",
    "hello world, how are you today? fine, thank you, and you?",
    "0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20",
] * 20

CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}assistant: {% endif %}")


def build(out: str) -> None:
    if all(os.path.exists(os.path.join(out, f)) for f in ("config.json", "tokenizer.json")):
        return
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    os.makedirs(out, exist_ok=True)
    special = ["<pad>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(TEXT, trainers.BpeTrainer(
        vocab_size=400, special_tokens=special,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                                   eos_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=256, intermediate_size=512,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                         head_dim=64, max_position_embeddings=512,
                         bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
                         pad_token_id=fast.pad_token_id, torch_dtype="float32")
    LlamaForCausalLM(config).save_pretrained(out)


if __name__ == "__main__":
    build(sys.argv[1])
