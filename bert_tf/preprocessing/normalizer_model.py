"""A `tensorflow_text.FastBertNormalizer` model built from a Python code point mapping.

FastBertNormalizer replaces each code point by a string looked up in a darts-clone trie keyed by
the code point's UTF-8 bytes (see tensorflow_text's `fast_bert_normalizer.h`); the model it reads
is a flatbuffer (`FastBertNormalizerModel`: `lower_case_nfd_strip_accents`, `trie_array`,
`data_for_codepoint_zero`, `normalized_string_pool`). Its own builder fills the trie from ICU's
case folding and NFD, which differ from the original BERT's `str.lower` and Python's NFD; here the
trie holds exactly the mapping we give it, so the kernel applies BERT's per-character rules.
"""

import flatbuffers
import numpy as np

# Bits of a trie value (fast_bert_normalizer.h): bit 30 "differs from the code point", then the
# string's offset in the pool (24 bits) and its length in UTF-8 bytes (6 bits).
_DIFFERENT_BIT = 1 << 30
_LENGTH_BITS = 6
_MAX_LENGTH = (1 << _LENGTH_BITS) - 1
_MAX_POOL_OFFSET = (1 << 24) - 1
# Darts-clone units: label in the low byte, has-leaf bit, offset to the children from bit 10;
# a value unit has the top bit set (so no label can match it).
_HAS_LEAF_BIT = 1 << 8
_VALUE_BIT = 1 << 31
_MAX_DIRECT_OFFSET = 1 << 21


def build_model(mapping, lower_case_nfd_strip_accents):
    """Flatbuffer bytes of a FastBertNormalizer model that maps code points as `mapping` says.

    Args:
      mapping: {code point (int): replacement (str)} for every code point whose output is not
        the code point itself ("" drops it); code point 0 is allowed.
      lower_case_nfd_strip_accents: stored in the model as a label only (the kernel reads the
        trie, not this flag).

    Returns:
      bytes, for `tf_text.FastBertNormalizer(model_buffer=...)`.

    Raises:
      ValueError: for a replacement over 63 UTF-8 bytes, or a string pool over 16 MiB.
    """
    pool = bytearray()
    pool_offsets = {}
    keys = []
    data_for_code_point_zero = 0
    for code_point, replacement in sorted(mapping.items()):
        encoded = replacement.encode("utf-8")
        if len(encoded) > _MAX_LENGTH:
            raise ValueError(f"replacement of U+{code_point:04X} is over {_MAX_LENGTH} bytes")
        data = _DIFFERENT_BIT
        if encoded:
            if encoded not in pool_offsets:
                pool_offsets[encoded] = len(pool)
                pool.extend(encoded)
            if pool_offsets[encoded] > _MAX_POOL_OFFSET:
                raise ValueError("normalizer string pool over 16 MiB")
            data |= (pool_offsets[encoded] << _LENGTH_BITS) | len(encoded)
        if code_point == 0:
            data_for_code_point_zero = data  # a trie cannot hold the key b"\0"
        else:
            keys.append((chr(code_point).encode("utf-8"), data))
    trie = darts_clone_trie(keys)
    return _flatbuffer(lower_case_nfd_strip_accents, trie, data_for_code_point_zero, bytes(pool))


def darts_clone_trie(keys):
    """A darts-clone double array holding `keys`, as read by tensorflow_text's trie wrapper.

    Children of the node at position p sit at `o ^ label`, where o = p ^ (the node's offset
    field), and the node's value at `o ^ 0`. Every node gets its own o, so a byte that is not
    among a node's labels lands on a slot whose label cannot match.

    Args:
      keys: list of (bytes without a zero byte, value int in [0, 2**31)).

    Returns:
      numpy uint32 array.
    """
    root = {}
    for key, value in keys:
        node = root
        for byte in key:
            node = node.setdefault(byte, {})
        node[0] = value  # label 0: the leaf that holds the value
    units = [0]
    used = bytearray(b"\x01")
    taken_offsets = set()
    first_free = 1
    queue = [(root, 0)]
    for node, position in queue:
        labels = sorted(node)
        while first_free < len(used) and used[first_free]:
            first_free += 1
        offset = _free_offset(labels, used, taken_offsets, first_free)
        taken_offsets.add(offset)
        relative = position ^ offset
        if relative >= _MAX_DIRECT_OFFSET:
            raise ValueError("darts-clone trie over 2**21 units")
        grow = (offset | 0xFF) + 1 - len(units)
        if grow > 0:
            units.extend([0] * grow)
            used.extend(bytes(grow))
        units[position] |= (relative << 10) | (_HAS_LEAF_BIT if 0 in node else 0)
        for label in labels:
            child = offset ^ label
            used[child] = 1
            if label == 0:
                units[child] = _VALUE_BIT | node[0]
            else:
                units[child] = label
                queue.append((node[label], child))
    size = used.rindex(1) + 1
    return np.array(units[:size], np.uint32)


def _free_offset(labels, used, taken_offsets, first_free):
    """The first offset o (not yet taken) whose slots `o ^ label` are all free and not slot 0."""
    size = len(used)
    slot = first_free
    while True:
        if slot < size and used[slot]:
            slot = used.find(0, slot)
            slot = size if slot < 0 else slot
            continue
        offset = slot ^ labels[0]
        if offset not in taken_offsets and all(
            (offset ^ label) != 0 and ((offset ^ label) >= size or not used[offset ^ label])
            for label in labels
        ):
            return offset
        slot += 1


def _flatbuffer(lower_case_nfd_strip_accents, trie, data_for_code_point_zero, pool):
    """Serializes `FastBertNormalizerModel` (fields in schema order, slots 0 to 3)."""
    builder = flatbuffers.Builder(len(pool) + 4 * len(trie) + 64)
    trie_vector = builder.CreateNumpyVector(trie.astype("<u4"))
    pool_vector = builder.CreateByteVector(pool)
    builder.StartObject(4)
    builder.PrependBoolSlot(0, lower_case_nfd_strip_accents, False)
    builder.PrependUOffsetTRelativeSlot(1, trie_vector, 0)
    builder.PrependInt32Slot(2, data_for_code_point_zero, 0)
    builder.PrependUOffsetTRelativeSlot(3, pool_vector, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())
