"""Tables of the normalized path: BERT's per-character rules inside tensorflow-text's own kernels.

For a string of any script, `FullTokenizer`'s BasicTokenizer is, character by character, a
mapping (drop controls, whitespace to " ", `NFD(char.lower())` without Mn marks when
lower-casing) followed by a split at whitespace, punctuation and CJK ideographs. The normalized
path runs that as two batch kernels:
  1. `FastBertNormalizer` with a model built here from the Python rules (`normalizer_model`), so
     every code point maps exactly as the original's per-character code maps it.
  2. `FastWordpieceTokenizer` in end-to-end mode, which splits at its own whitespace and
     punctuation-or-CJK sets (ICU's, of tensorflow-text's Unicode version) and runs WordPiece.
     Where the original splits at a punctuation character the kernel would not, the mapping puts
     spaces around it.
A string may take this path only where the result is provably the original's; the rest take the
code point path. Three things are not per character:
  * characters whose kernel class disagrees with the original's (found by running the kernel
    on every code point), kept marks with a non-zero combining class (canonical reordering),
    and invalid UTF-8 (the normalizer would turn it into a space): such strings do not match
    `row_pattern`, a full match over the safe characters;
  * final sigma (lower-casing only): a capital sigma is safe where Python cannot make it final,
    right after a character that is neither cased nor case-ignorable (or at the start), or
    right before a cased character that is not case-ignorable; `row_pattern` allows it there;
  * the 200-character word limit: the kernel counts bytes (`max_bytes_per_word=200`), so a word
    of 200 bytes or fewer is tokenized as the original does, and a longer one becomes one [UNK]
    over the whole word; the preprocessor sends a string with such an [UNK] down the code
    point path (its word may have 200 characters or fewer).
"""

import functools
import typing
import unicodedata

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from bert_tf import tokenization
from bert_tf.preprocessing import code_points, normalizer_model

# How FastWordpieceTokenizer's end-to-end mode treats a character.
_JOIN, _SPLIT, _SPACE, _OTHER = 0, 1, 2, 3
_CAPITAL_SIGMA = "\u03a3"
_SURROGATES = range(0xD800, 0xE000)


class NormalizedPathTables(typing.NamedTuple):
    """What the normalized path of one casing needs (see the module docstring)."""

    model_buffer: bytes  # FastBertNormalizer model
    row_pattern: str  # RE2, full match: the string may take the normalized path


@functools.lru_cache(maxsize=1)
def kernel_char_classes():
    """How the end-to-end FastWordpieceTokenizer treats each code point, found by running it.

    Each probe is "a" + char with a vocab of "a" alone: one piece over both characters is a
    word character, "a" then a piece for char a split, "a" alone whitespace.

    Returns:
      numpy int8 [0x110000]: _JOIN, _SPLIT, _SPACE or _OTHER (surrogates: _OTHER).
    """
    code_point = np.array(
        [cp for cp in range(code_points.NUM_CODE_POINTS) if cp not in _SURROGATES]
    )
    with tf.init_scope():  # eager, even when a preprocessor is built inside a tf.function
        probes = tf.constant(["a" + chr(cp) for cp in code_point.tolist()])
        tokenizer = tf_text.FastWordpieceTokenizer(["[UNK]", "a"], token_out_type=tf.int32)
        ids, starts, ends = tokenizer.tokenize_with_offsets(probes)
        num_pieces = ids.row_lengths().numpy()  # at least 1: "a"
        last = ids.row_limits().numpy() - 1
        last_start = starts.flat_values.numpy()[last]
        last_end = ends.flat_values.numpy()[last]
        char_bytes = tf.strings.length(probes).numpy() - 1
    classes = np.full(code_points.NUM_CODE_POINTS, _OTHER, np.int8)
    joined = (num_pieces == 1) & (last_start == 0) & (last_end == 1 + char_bytes)
    split = (num_pieces == 2) & (last_start == 1) & (last_end == 1 + char_bytes)
    space = (num_pieces == 1) & (last_end == 1)
    classes[code_point[joined]] = _JOIN
    classes[code_point[split]] = _SPLIT
    classes[code_point[space]] = _SPACE
    return classes


@functools.lru_cache(maxsize=2)
def normalized_path_tables(do_lower_case):
    """The normalizer model and the row pattern of one casing."""
    kernel = kernel_char_classes()
    size = code_points.NUM_CODE_POINTS
    # Unassigned and private-use code points outside the CJK blocks: word characters mapped to
    # themselves, neither cased nor case-ignorable (so sigma barriers).
    safe = kernel == _JOIN
    barrier = safe.copy()
    cased = np.zeros(size, bool)
    mapping = {}
    for cp in _code_points_with_rules():
        char = chr(cp)
        if kernel[cp] == _SPLIT and _is_plain_ideograph(char):
            barrier[cp] = safe[cp] = True  # what _char_rule gives, 3x faster (90k of these)
            continue
        rule = _char_rule(char, do_lower_case, kernel)
        safe[cp], barrier[cp], cased[cp] = rule.safe, rule.barrier, rule.cased
        if rule.replacement != chr(cp):
            mapping[cp] = rule.replacement
    safe[list(_SURROGATES)] = False
    if do_lower_case:
        safe[ord(_CAPITAL_SIGMA)] = False
        sigma = r"\x{3A3}"
        row_pattern = (
            f"{sigma}?(?:{_char_class(safe)}|{_char_class(safe & barrier)}{sigma}"
            f"|{sigma}{_char_class(safe & cased)})*"
        )
    else:
        row_pattern = f"{_char_class(safe)}*"
    model_buffer = normalizer_model.build_model(mapping, do_lower_case)
    return NormalizedPathTables(model_buffer, row_pattern)


class _CharRule(typing.NamedTuple):
    replacement: str  # what the normalizer writes for it
    safe: bool  # the kernels give the original's result wherever it stands
    barrier: bool  # a capital sigma right after it cannot be final
    cased: bool  # cased and not case-ignorable: a sigma right before it is not final


def _char_rule(char, do_lower_case, kernel):
    """The normalizer's replacement for `char` and its flags, from `tokenization`'s rules."""
    if char in ("\x00", "\ufffd") or tokenization._is_control(char):
        return _CharRule("", safe=True, barrier=False, cased=False)
    # str.split() in whitespace_tokenize also splits on U+2028 and U+2029.
    if tokenization._is_whitespace(char) or char.isspace():
        return _CharRule(" ", safe=True, barrier=True, cased=False)
    is_cjk = tokenization._is_chinese_char(ord(char))
    chars = char
    if do_lower_case:
        decomposed = unicodedata.normalize("NFD", char.lower())
        chars = "".join(c for c in decomposed if unicodedata.category(c) != "Mn")
    is_punctuation = [tokenization._is_punctuation(c) for c in chars]
    kernel_class = [kernel[ord(c)] for c in chars]
    # The kernel must not split a word character, nor see whitespace or anything else odd; a
    # CJK ideograph it splits off by itself, or it gets spaces around it below.
    safe = all(
        kind == _JOIN or (kind == _SPLIT and punctuation)
        for kind, punctuation in zip(kernel_class, is_punctuation, strict=True)
    )
    alone = len(chars) == 1 and kernel_class[0] == _SPLIT
    safe |= is_cjk and alone
    if do_lower_case and any(unicodedata.combining(c) for c in chars):
        safe = False  # NFD would reorder it with its neighbours
    replacement = "".join(
        f" {c} " if punctuation and kind != _SPLIT else c
        for c, punctuation, kind in zip(chars, is_punctuation, kernel_class, strict=True)
    )
    if is_cjk and not alone:
        replacement = f" {replacement} "  # the original makes it a word of its own
    flags = code_points.final_sigma_flags(char) if do_lower_case and not is_cjk else 0
    return _CharRule(
        replacement,
        safe=safe,
        barrier=is_cjk or flags == 0,
        cased=flags == code_points.CASED_BIT,
    )


def _is_plain_ideograph(char):
    """A CJK ideograph with no decomposition: no case, NFD leaves it, not punctuation."""
    if not tokenization._is_chinese_char(ord(char)):
        return False
    return unicodedata.category(char) == "Lo" and not unicodedata.decomposition(char)


def _code_points_with_rules():
    """Code points other than surrogates and the unassigned or private-use ones outside the
    CJK blocks (those all follow the defaults of `normalized_path_tables`)."""
    in_cjk_block = np.zeros(code_points.NUM_CODE_POINTS, bool)
    for first, last in tokenization._CJK_RANGES:
        in_cjk_block[first : last + 1] = True
    for cp in range(code_points.NUM_CODE_POINTS):
        if cp in _SURROGATES:
            continue
        if in_cjk_block[cp] or unicodedata.category(chr(cp)) not in ("Cn", "Co"):
            yield cp


def _char_class(mask):
    """An RE2 character class of the code points where `mask` (bool [0x110000]) is set."""
    changes = np.flatnonzero(np.diff(np.concatenate([[False], mask, [False]]).astype(np.int8)))
    ranges = []
    for first, end in zip(changes[::2].tolist(), changes[1::2].tolist(), strict=True):
        last = end - 1
        ranges.append(rf"\x{{{first:X}}}" if first == last else rf"\x{{{first:X}}}-\x{{{last:X}}}")
    return "[" + "".join(ranges) + "]"
