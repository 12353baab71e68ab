"""pf's Python side: model export (``pipefisher.bert_onnx``), configs, tool drivers."""

from .configs import CONFIGS, BertConfig, get_config

__all__ = ["CONFIGS", "BertConfig", "get_config", "make_bert_model", "save_model"]


def __getattr__(name):
    # Imported lazily so that ``python3 -m pipefisher.bert_onnx`` does not import the
    # module twice (runpy warns when a package pre-imports the module it runs).
    if name in ("make_bert_model", "save_model"):
        from . import bert_onnx
        return getattr(bert_onnx, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
