"""BERT model sizes used by pf (Hugging Face ``BertConfig`` field names)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class BertConfig:
    """The subset of Hugging Face's ``BertConfig`` that shapes the graph."""

    name: str
    num_hidden_layers: int
    hidden_size: int
    num_attention_heads: int
    intermediate_size: int
    vocab_size: int = 30522
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12

    def __post_init__(self) -> None:
        if self.num_hidden_layers < 1:
            raise ValueError(f"num_hidden_layers must be >= 1, got {self.num_hidden_layers}")
        if self.vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {self.vocab_size}")
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size {self.hidden_size} is not a multiple of "
                f"num_attention_heads {self.num_attention_heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def replace(self, **changes) -> "BertConfig":
        """A copy with some fields changed (``None`` values are ignored)."""
        changes = {k: v for k, v in changes.items() if v is not None}
        return dataclasses.replace(self, **changes)

    def num_parameters(self) -> int:
        """Parameter count of BertForMaskedLM (tied decoder counted once, position_ids excluded)."""
        h, i, v = self.hidden_size, self.intermediate_size, self.vocab_size
        emb = (v + self.max_position_embeddings + self.type_vocab_size) * h + 2 * h
        block = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
        head = (h * h + h) + 2 * h + v
        return emb + self.num_hidden_layers * block + head


#: name -> (layers, hidden, heads, intermediate)
_SIZES = {
    "tiny": (2, 128, 2, 512),
    "mini": (4, 256, 4, 1024),
    "small": (4, 512, 8, 2048),
    "medium": (8, 512, 8, 2048),
    "base": (12, 768, 12, 3072),
    "large": (24, 1024, 16, 4096),
}

CONFIGS: dict[str, BertConfig] = {
    name: BertConfig(name, layers, hidden, heads, inter)
    for name, (layers, hidden, heads, inter) in _SIZES.items()
}


def get_config(name: str, *, vocab_size: int | None = None,
               num_hidden_layers: int | None = None) -> BertConfig:
    """The named config, with optional overrides of the vocabulary size and layer count."""
    try:
        cfg = CONFIGS[name]
    except KeyError:
        raise ValueError(f"unknown config {name!r}; choose from {', '.join(CONFIGS)}") from None
    return cfg.replace(vocab_size=vocab_size, num_hidden_layers=num_hidden_layers)
