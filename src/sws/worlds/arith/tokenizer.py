"""The tiny policy's character-level tokenizer: one token per byte-level character, plus pad and EOS.

Built with the `tokenizers` library as a BPE model with *no merges*, so every character is one token. It is
byte-level (space is `Ġ`, newline `Ċ`, like GPT-2/Qwen2) because transformers loads any tokenizer of a
`qwen2` model folder as `Qwen2Tokenizer`, which rebuilds a byte-level pipeline around the saved vocabulary
and merges; this vocabulary gives the same ids through that class, `PreTrainedTokenizerFast`, TRL and vLLM.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from transformers import PreTrainedTokenizerFast

PAD, EOS = "<pad>", "<eos>"
SPECIAL_TOKENS = (PAD, EOS)


def build_tokenizer() -> PreTrainedTokenizerFast:
    symbols = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: index for index, token in enumerate((*SPECIAL_TOKENS, *symbols))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False, byte_fallback=False))
    backend.normalizer = normalizers.NFC()
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(list(SPECIAL_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token=PAD, eos_token=EOS, unk_token=None, padding_side="left",
        model_max_length=128,
    )
