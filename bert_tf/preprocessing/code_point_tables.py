"""The code point path's tables: one 32-bit info word per code point, computed from the Python rules.

Every rule of `BasicTokenizer` is read off by running the very predicates of `bert_tf/tokenization.py`
and Python's `str.lower` / `unicodedata` on every code point, so the graph (code_points.py) agrees with
`FullTokenizer` on this Python's Unicode version. Blocks of 2**`BLOCK_BITS` code points with identical
info words are stored once (143 KB lower-cased, 93 KB cased). An info word holds the kind (word
character, CJK ideograph, whitespace, dropped), the punctuation flag, and, when lower-casing, the
replacement: the characters of `NFD(char.lower())` that are not Mn marks, in a small flat table of
output-character words (Hangul syllables are decomposed in the graph, arithmetically).
"""

import functools
import unicodedata

import numpy as np

from bert_tf import tokenization

# Code points share a table block when their 2**BLOCK_BITS info words are identical.
BLOCK_BITS = 7
NUM_CODE_POINTS = 0x110000

# Bits of a code point's info word (int32).
KIND_MASK = 0b11  # one of the kinds below
NORMAL, CJK, SPACE, DROP = 0, 1, 2, 3
CASE_IGNORABLE_BIT = 1 << 2  # Python's Final_Sigma test skips it
CASED_BIT = 1 << 3
MAPPED_BIT = 1 << 4  # lower-casing replaces the character (else it is kept as it is)
NUM_MAPPED_SHIFT = 5  # 2 bits: how many characters replace it (0 to 3)
TRAILING_BREAK_BIT = 1 << 7  # its decomposition ends with a dropped starter (reordering)
REPLACEMENT_START_SHIFT = 8  # 13 bits: where its replacement starts in the flat table
REPLACEMENT_START_MASK = (1 << 13) - 1
# Bits of an output character, shared by info words (the character itself) and replacements.
CODE_POINT_MASK = (1 << 21) - 1
PUNCTUATION_BIT = 1 << 21
BREAK_BIT = 1 << 22  # combining class 0, or a dropped starter precedes it: a reordering barrier
COMBINING_CLASS_SHIFT = 23  # 8 bits
OUTPUT_FLAGS_MASK = PUNCTUATION_BIT | BREAK_BIT | (0xFF << COMBINING_CLASS_SHIFT)

CAPITAL_SIGMA, FINAL_SIGMA = 0x3A3, 0x3C2
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3


class CodePointTables:
    """Per-code-point tables of one casing, as numpy arrays (see `code_point_tables`)."""

    def __init__(self, block_starts, block_info, replacements, final_sigma_info):
        self.block_starts = block_starts  # int32 [0x110000 >> BLOCK_BITS]
        self.block_info = block_info  # int32 [blocks << BLOCK_BITS]
        self.replacements = replacements  # int32 [R], output-character words
        self.final_sigma_info = final_sigma_info  # Python int: info word of U+03C2


@functools.lru_cache(maxsize=2)
def code_point_tables(do_lower_case):
    """Info word of every code point, deduplicated into blocks; replacement characters.

    Unassigned and private-use code points outside the CJK blocks all have their category's
    default properties, so one representative of each stands for the rest (a 5x faster build).
    """
    info = np.zeros(NUM_CODE_POINTS, np.int64)
    replacements = [0]  # entry 0: the target of the unmapped characters' dummy gather
    replacement_starts = {(): 0}
    default_info = {}
    in_cjk_block = np.zeros(NUM_CODE_POINTS, bool)
    for first, last in tokenization._CJK_RANGES:
        in_cjk_block[first : last + 1] = True
    in_cjk_block = in_cjk_block.tolist()
    for code_point in range(NUM_CODE_POINTS):
        char = chr(code_point)
        category = unicodedata.category(char)
        if category in ("Cn", "Co") and not in_cjk_block[code_point]:
            if category not in default_info:
                default_info[category] = _char_info(
                    char, do_lower_case, replacements, replacement_starts
                )
            info[code_point] = default_info[category]
        else:
            info[code_point] = _char_info(char, do_lower_case, replacements, replacement_starts)
    if len(replacements) > REPLACEMENT_START_MASK:
        raise ValueError(f"{len(replacements)} replacement characters overflow the info word")
    blocks, block_of_code_point = np.unique(
        info.reshape(-1, 1 << BLOCK_BITS), axis=0, return_inverse=True
    )
    return CodePointTables(
        block_starts=(block_of_code_point.reshape(-1) << BLOCK_BITS).astype(np.int32),
        block_info=blocks.reshape(-1).astype(np.int32),
        replacements=np.array(replacements, np.int32),
        final_sigma_info=int(info[FINAL_SIGMA]),
    )


def _char_info(char, do_lower_case, replacements, replacement_starts):
    """Info word of one character, by `tokenization`'s predicates; may extend `replacements`."""
    code_point = ord(char)
    if char in ("\x00", "\ufffd") or tokenization._is_control(char):
        return DROP | CASE_IGNORABLE_BIT
    # str.split() in whitespace_tokenize also splits on U+2028 and U+2029.
    if tokenization._is_whitespace(char) or char.isspace():
        return SPACE | BREAK_BIT
    kind = CJK if tokenization._is_chinese_char(code_point) else NORMAL
    if not do_lower_case:
        return kind | (_output_bits(char, combining_class=0) & OUTPUT_FLAGS_MASK)
    info = kind
    if kind == NORMAL:
        info |= final_sigma_flags(char)
    if HANGUL_FIRST <= code_point <= HANGUL_LAST:
        _check_hangul(char)
        return info  # decomposed in the graph
    kept, trailing_break = _lowered_without_marks(char)
    if kept == [_output_bits(char, unicodedata.combining(char))] and not trailing_break:
        return info | (kept[0] & OUTPUT_FLAGS_MASK)
    key = tuple(kept)
    if key not in replacement_starts:
        replacement_starts[key] = len(replacements)
        replacements.extend(kept)
    info |= MAPPED_BIT | (len(kept) << NUM_MAPPED_SHIFT)
    info |= TRAILING_BREAK_BIT if trailing_break else 0
    return info | (replacement_starts[key] << REPLACEMENT_START_SHIFT)


def _lowered_without_marks(char):
    """Output-character words of `NFD(char.lower())` without Mn, and whether it ends in a
    dropped mark of combining class 0 (a reordering barrier that leaves nothing behind)."""
    kept = []
    pending_break = False
    for decomposed in unicodedata.normalize("NFD", char.lower()):
        combining_class = unicodedata.combining(decomposed)
        if unicodedata.category(decomposed) == "Mn":
            pending_break |= combining_class == 0
            continue
        bits = _output_bits(decomposed, combining_class)
        kept.append(bits | (BREAK_BIT if pending_break else 0))
        pending_break = False
    return kept, pending_break


def _output_bits(char, combining_class):
    """Output-character word: code point, punctuation bit, break bit, combining class."""
    bits = ord(char) | (PUNCTUATION_BIT if tokenization._is_punctuation(char) else 0)
    bits |= BREAK_BIT if combining_class == 0 else 0
    return bits | (combining_class << COMBINING_CLASS_SHIFT)


def final_sigma_flags(char):
    """Case-ignorable and cased bits of `char`, read off Python's own final-sigma lower-casing.

    "A" is cased and " " is neither, so: "A" + char + "Σ" ends in final sigma iff char is
    case-ignorable or cased; " " + char + "Σ" iff char is cased and not case-ignorable.
    """
    after_cased = ("A" + char + "\u03a3").lower()[-1] == "\u03c2"
    after_space = (" " + char + "\u03a3").lower()[-1] == "\u03c2"
    if after_space:
        return CASED_BIT
    return CASE_IGNORABLE_BIT if after_cased else 0


def _check_hangul(char):
    """Raises if Python's NFD of a Hangul syllable is not what `_hangul_jamo` computes."""
    index = ord(char) - HANGUL_FIRST
    jamo = [0x1100 + index // 588, 0x1161 + (index % 588) // 28]
    if index % 28:
        jamo.append(0x11A7 + index % 28)
    if [ord(c) for c in unicodedata.normalize("NFD", char.lower())] != jamo:
        raise ValueError(f"unexpected decomposition of U+{ord(char):04X}")
