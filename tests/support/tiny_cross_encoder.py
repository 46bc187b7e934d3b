"""A tiny but real ONNX "cross-encoder" for tests: its relevance logit is how often one chosen
token occurs in the pair, so tests can predict its ranking while exercising the real loading,
tokenising and onnxruntime path."""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper
from tokenizers import Tokenizer

from engram.models.embedder import tokenizer_json


def build(directory: Path, favourite_word: str) -> Path:
    """Write model.onnx and tokenizer.json into `directory`; returns it."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tokenizer.json").write_text(tokenizer_json(), encoding="utf-8")
    token_id = Tokenizer.from_file(str(directory / "tokenizer.json")).token_to_id(favourite_word)
    inputs = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"])
              for name in ("input_ids", "attention_mask", "token_type_ids")]
    output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])
    nodes = [
        helper.make_node("Constant", [], ["favourite"], value=helper.make_tensor("f", TensorProto.INT64, [], [token_id])),
        helper.make_node("Equal", ["input_ids", "favourite"], ["hits"]),
        helper.make_node("Cast", ["hits"], ["hits_float"], to=TensorProto.FLOAT),
        helper.make_node("Constant", [], ["axes"], value=helper.make_tensor("a", TensorProto.INT64, [1], [1])),
        helper.make_node("ReduceSum", ["hits_float", "axes"], ["count"], keepdims=1),
        helper.make_node("Constant", [], ["offset"], value=helper.make_tensor("o", TensorProto.FLOAT, [], [-0.5])),
        helper.make_node("Add", ["count", "offset"], ["logits"]),
    ]
    graph = helper.make_graph(nodes, "tiny_cross_encoder", inputs, [output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(directory / "model.onnx"))
    return directory
