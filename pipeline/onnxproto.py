"""The few ONNX protobuf messages an inference graph needs, written by hand, and the session
memsync runs every such graph in.

Protocol buffers' wire format is small and stable, and writing it here spares a dependency on
the `onnx` package (and its protobuf runtime) just to hand onnxruntime a graph built from
weights memsync already holds. Field numbers are those of onnx.proto (IR version 9); repeated
scalars are written unpacked, as proto2 declares them, which every parser accepts.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

IR_VERSION: Final = 9
# TensorProto.DataType
FLOAT: Final = 1
UINT8: Final = 2
INT8: Final = 3
INT32: Final = 6
INT64: Final = 7
# AttributeProto.AttributeType
_ATTR_FLOAT: Final = 1
_ATTR_INT: Final = 2
_ATTR_INTS: Final = 7

_VARINT, _FIXED32, _BYTES = 0, 5, 2
_DTYPES: Final = {"float32": FLOAT, "int8": INT8, "int64": INT64}

Attribute = int | float | Sequence[int]


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64 values go as their two's complement
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> bytes:
    return _key(field, _VARINT) + _varint(value)


def _bytes(field: int, value: bytes) -> bytes:
    return _key(field, _BYTES) + _varint(len(value)) + value


def _text(field: int, value: str) -> bytes:
    return _bytes(field, value.encode("utf-8"))


def _attribute(name: str, value: Attribute) -> bytes:
    if isinstance(value, float):
        body = _key(2, _FIXED32) + struct.pack("<f", value) + _int(20, _ATTR_FLOAT)
    elif isinstance(value, int):
        body = _int(3, value) + _int(20, _ATTR_INT)
    else:
        body = b"".join(_int(8, v) for v in value) + _int(20, _ATTR_INTS)
    return _text(1, name) + body


def node(op: str, inputs: Sequence[str], outputs: Sequence[str], **attributes: Attribute) -> bytes:
    """A NodeProto of the default (ai.onnx) domain."""
    parts = [*(_text(1, i) for i in inputs), *(_text(2, o) for o in outputs)]
    parts.append(_text(3, outputs[0]))
    parts.append(_text(4, op))
    parts.extend(_bytes(5, _attribute(k, v)) for k, v in attributes.items())
    return b"".join(parts)


def tensor(name: str, array: NDArray[np.float32] | NDArray[np.int8] | NDArray[np.int64]) -> bytes:
    """A TensorProto holding `array` (float32, int8 or int64) as little-endian raw data."""
    dtype = _DTYPES[array.dtype.name]
    dims = b"".join(_int(1, d) for d in array.shape)
    raw = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
    return dims + _int(2, dtype) + _text(8, name) + _bytes(9, raw)


def value_info(name: str, elem_type: int, shape: Sequence[int | str]) -> bytes:
    """A ValueInfoProto: a graph input or output of `elem_type`, each dimension a size or a
    symbolic name."""
    dims = b"".join(_bytes(1, _text(2, d) if isinstance(d, str) else _int(1, d)) for d in shape)
    tensor_type = _int(1, elem_type) + _bytes(2, dims)
    return _text(1, name) + _bytes(2, _bytes(1, tensor_type))


def model(
    name: str,
    nodes: Iterable[bytes],
    initializers: Iterable[bytes],
    inputs: Iterable[bytes],
    outputs: Iterable[bytes],
    *,
    opset: int,
) -> bytes:
    """A serialised ModelProto: one graph, the default operator set at `opset`."""
    graph = b"".join(
        [
            *(_bytes(1, n) for n in nodes),
            _text(2, name),
            *(_bytes(5, t) for t in initializers),
            *(_bytes(11, i) for i in inputs),
            *(_bytes(12, o) for o in outputs),
        ]
    )
    opset_id = _text(1, "") + _int(2, opset)
    return _int(1, IR_VERSION) + _text(2, "memsync") + _bytes(7, graph) + _bytes(8, opset_id)


def session(model: bytes, threads: int) -> Any:
    """An onnxruntime CPU session of `model` on at most `threads` threads, as memsync runs every
    graph: beside Neo4j and Celery on shared cores, and holding no more memory than it uses."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # Idle threads sleep rather than spin: the cores are shared with Neo4j and Celery.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    # Activations are allocated per run and given back: an arena would keep the largest
    # batch's (about 135 MB more resident for MiniLM, measured, for no speed).
    options.enable_cpu_mem_arena = False
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
