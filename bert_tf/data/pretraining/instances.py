"""Masked-LM + next-sentence pretraining instances: the original's procedure, on token ids.

A document is a list of sentences; a sentence is a list of WordPiece ids. For each document,
`create_instances_from_document` packs consecutive sentences into `[CLS] A [SEP] B [SEP]`
pairs, where B is the true continuation (label 0) or a span of another document (label 1), and
`create_masked_lm_predictions` picks the positions to predict. This mirrors google-research/bert
`create_pretraining_data.py` step for step, with these differences:
  * it works on ids (the vocab's tokens map 1:1 to ids), so no token strings are kept;
  * the masked positions are drawn by a partial Fisher-Yates shuffle (only as many candidates as
    needed are shuffled): the same distribution as shuffling them all, fewer random draws;
  * with whole-word masking, a "##" piece joins the previous word only when it directly follows
    it (the original would also join it across a [SEP] when truncation left B starting with one).

The paper's ablations (`objective`, bert_tf.objectives) make `[CLS] A [SEP]` instances instead: A is
a run of consecutive sentences of one document (the same target lengths, no random next, segment
ids all 0, next_sentence_labels 0); "mlm" masks them as above, "ltr" masks nothing (its
masked_lm_* features are all padding: a left-to-right LM predicts every next token).
With `dynamic_masking` no instance is masked: the reader masks them (dynamic.py, masking.py).
"""

import dataclasses
import typing

from bert_tf.errors import InputError
from bert_tf.objectives import DEFAULT_OBJECTIVE, OBJECTIVES

CLS_TOKEN = "[CLS]"
SEP_TOKEN = "[SEP]"
MASK_TOKEN = "[MASK]"


class TrainingInstance(typing.NamedTuple):
    """One example before padding. L = its length (<= max_seq_length), M = its predictions."""

    input_ids: list  # [L] ids of [CLS] A [SEP] B [SEP] (or [CLS] A [SEP]), masked ids replaced
    segment_ids: list  # [L] 0 for [CLS] A [SEP], 1 for B [SEP]
    masked_lm_positions: list  # [M] increasing positions into input_ids
    masked_lm_ids: list  # [M] the original ids at those positions (the labels)
    is_random_next: bool  # B is from another document (next_sentence_labels = 1)


@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The original's flags that shape instances, plus the vocab facts masking needs."""

    vocab_size: int  # one past the largest id
    cls_id: int
    sep_id: int
    mask_id: int
    subword_ids: frozenset  # ids of "##" continuation pieces (whole-word masking)
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    masked_lm_prob: float = 0.15
    short_seq_prob: float = 0.1
    do_whole_word_mask: bool = False
    # The ids random replacements are drawn from, when not every id below vocab_size is a token (a
    # vocab file with a repeated line); None = all of range(vocab_size).
    replacement_ids: tuple | None = None
    objective: str = DEFAULT_OBJECTIVE  # bert_tf.objectives: "mlm_nsp", "mlm" or "ltr"
    # Leave the instances unmasked: run_pretraining.py --dynamic_masking masks them (dynamic.py).
    dynamic_masking: bool = False

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise InputError(f"--objective must be one of {OBJECTIVES}, got {self.objective!r}")
        if self.dynamic_masking and self.objective == "ltr":
            raise InputError(
                "--dynamic_masking applies to the masked-LM objectives (mlm_nsp, mlm), not "
                "--objective=ltr, which masks nothing"
            )
        if self.max_seq_length < 5:
            raise InputError(
                f"--max_seq_length must be >= 5 ([CLS] a [SEP] b [SEP]), got {self.max_seq_length}"
            )
        if self.max_predictions_per_seq < 0:
            raise InputError(
                f"--max_predictions_per_seq must be >= 0, got {self.max_predictions_per_seq}"
            )
        for name in ("masked_lm_prob", "short_seq_prob"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise InputError(f"--{name} must be in [0, 1], got {value}")

    @classmethod
    def from_vocab(cls, vocab, **flags):
        """Builds options from a token -> id dict (e.g. `FullTokenizer.vocab`) and flag values.

        Raises:
          InputError: if the vocab lacks [CLS], [SEP] or [MASK], or a flag is out of range.
        """
        missing = [t for t in (CLS_TOKEN, SEP_TOKEN, MASK_TOKEN) if t not in vocab]
        if missing:
            raise InputError(f"the vocab file lacks the special tokens {missing}")
        # The original draws replacements uniformly from the vocab's tokens. load_vocab numbers
        # lines, so a repeated line leaves its first id unused and the ids are not range(len(vocab)).
        ids = sorted(set(vocab.values()))
        contiguous = ids == list(range(len(ids)))
        return cls(
            vocab_size=ids[-1] + 1,
            replacement_ids=None if contiguous else tuple(ids),
            cls_id=vocab[CLS_TOKEN],
            sep_id=vocab[SEP_TOKEN],
            mask_id=vocab[MASK_TOKEN],
            subword_ids=frozenset(i for token, i in vocab.items() if token.startswith("##")),
            **flags,
        )


def create_instances(documents, options, dupe_factor, rng):
    """All instances of `documents`, `dupe_factor` passes with fresh masks, shuffled.

    Args:
      documents: list of documents; each a non-empty list of non-empty id lists (sentences).
        The random "next" segments are drawn from these documents.
      options: an `InstanceOptions`.
      dupe_factor: passes over the documents.
      rng: a `random.Random`.

    Returns:
      A list of `TrainingInstance`.
    """
    instances = []
    for _ in range(dupe_factor):
        for document_index in range(len(documents)):
            instances.extend(
                create_instances_from_document(documents, document_index, options, rng)
            )
    rng.shuffle(instances)
    return instances


def create_instances_from_document(documents, document_index, options, rng):
    """Packs one document into instances (the original's function of the same name).

    Sentences accumulate into a chunk until it holds `target_seq_length` ids (max_seq_length - 3,
    or with probability short_seq_prob a random length in [2, max_seq_length - 3], drawn once per
    document as in the original); the chunk splits at a random sentence boundary into A and B.
    B is replaced by a span of another document when the chunk has one sentence or with
    probability 0.5; its unused sentences are then put back.
    """
    if options.objective != "mlm_nsp":
        return _single_segment_instances(documents[document_index], options, rng)
    document = documents[document_index]
    max_num_tokens = options.max_seq_length - 3
    target_seq_length = _target_length(max_num_tokens, options, rng)

    instances = []
    current_chunk = []
    current_length = 0
    i = 0
    while i < len(document):
        current_chunk.append(document[i])
        current_length += len(document[i])
        if i == len(document) - 1 or current_length >= target_seq_length:
            a_end = 1 + _below(rng, len(current_chunk) - 1) if len(current_chunk) >= 2 else 1
            tokens_a = [t for sentence in current_chunk[:a_end] for t in sentence]
            is_random_next = len(current_chunk) == 1 or rng.random() < 0.5
            if is_random_next:
                tokens_b = _random_span(
                    documents, document_index, target_seq_length - len(tokens_a), rng
                )
                i -= len(current_chunk) - a_end  # the unused sentences are used later
            else:
                tokens_b = [t for sentence in current_chunk[a_end:] for t in sentence]
            tokens_a, tokens_b = truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng)
            instances.append(_pack_and_mask(tokens_a, tokens_b, is_random_next, options, rng))
            current_chunk = []
            current_length = 0
        i += 1
    return instances


def _target_length(max_num_tokens, options, rng):
    """An instance's target length: max_num_tokens, or with probability short_seq_prob a random one
    in [2, max_num_tokens], as the original draws it (one rng.random(), then one more draw)."""
    if rng.random() < options.short_seq_prob:
        return 2 + _below(rng, max_num_tokens - 1)
    return max_num_tokens


def _single_segment_instances(document, options, rng):
    """Packs one document into `[CLS] A [SEP]` instances of consecutive sentences (objectives mlm, ltr).

    The chunks accumulate as create_instances_from_document's, to max_seq_length - 2 ids (or a
    shorter random target with probability short_seq_prob); a chunk is never split and never meets
    another document.
    """
    max_num_tokens = options.max_seq_length - 2
    target_seq_length = _target_length(max_num_tokens, options, rng)
    instances = []
    current_chunk = []
    for i, sentence in enumerate(document):
        current_chunk.extend(sentence)
        if i == len(document) - 1 or len(current_chunk) >= target_seq_length:
            tokens, _ = truncate_seq_pair(current_chunk, [], max_num_tokens, rng)
            input_ids = [options.cls_id, *tokens, options.sep_id]
            segment_ids = [0] * len(input_ids)
            if options.objective == "ltr" or options.dynamic_masking:
                instances.append(TrainingInstance(input_ids, segment_ids, [], [], False))
            else:
                masked_ids, positions, labels = create_masked_lm_predictions(
                    input_ids, options, rng
                )
                instances.append(
                    TrainingInstance(masked_ids, segment_ids, positions, labels, False)
                )
            current_chunk = []
    return instances


def _random_span(documents, document_index, target_length, rng):
    """Consecutive sentences of another document from a random start, up to `target_length` ids."""
    for _ in range(10):  # the original's bound: with one document, the span is from itself
        random_index = _below(rng, len(documents))
        if random_index != document_index:
            break
    random_document = documents[random_index]
    tokens_b = []
    for sentence in random_document[_below(rng, len(random_document)) :]:
        tokens_b.extend(sentence)
        if len(tokens_b) >= target_length:
            break
    return tokens_b


def truncate_seq_pair(tokens_a, tokens_b, max_num_tokens, rng):
    """Removes ids from the longer side (B on ties), each from its front or back at random.

    Returns:
      (tokens_a, tokens_b), new lists with len(tokens_a) + len(tokens_b) <= max_num_tokens.
    """
    a_start, a_end, b_start, b_end = 0, len(tokens_a), 0, len(tokens_b)
    while (a_end - a_start) + (b_end - b_start) > max_num_tokens:
        front = rng.random() < 0.5
        if a_end - a_start > b_end - b_start:
            a_start, a_end = (a_start + 1, a_end) if front else (a_start, a_end - 1)
        else:
            b_start, b_end = (b_start + 1, b_end) if front else (b_start, b_end - 1)
    return tokens_a[a_start:a_end], tokens_b[b_start:b_end]


def _pack_and_mask(tokens_a, tokens_b, is_random_next, options, rng):
    input_ids = [options.cls_id, *tokens_a, options.sep_id, *tokens_b, options.sep_id]
    segment_ids = [0] * (len(tokens_a) + 2) + [1] * (len(tokens_b) + 1)
    if options.dynamic_masking:
        return TrainingInstance(input_ids, segment_ids, [], [], is_random_next)
    masked_ids, positions, labels = create_masked_lm_predictions(input_ids, options, rng)
    return TrainingInstance(masked_ids, segment_ids, positions, labels, is_random_next)


def create_masked_lm_predictions(input_ids, options, rng):
    """Chooses positions to predict and replaces them (80% [MASK], 10% random id, 10% kept).

    `min(max_predictions_per_seq, max(1, round(len(input_ids) * masked_lm_prob)))` positions
    among the non-special ids; with whole-word masking, words ("##" pieces with the piece before
    them) are chosen whole and skipped when they would overshoot that count.

    Returns:
      (masked_input_ids, masked_lm_positions (sorted), masked_lm_ids (the original ids)).
    """
    num_to_predict = min(
        options.max_predictions_per_seq, max(1, round(len(input_ids) * options.masked_lm_prob))
    )
    if options.do_whole_word_mask:
        chosen = _choose_whole_words(_whole_words(input_ids, options), num_to_predict, rng)
    else:
        chosen = _choose_positions(input_ids, options, num_to_predict, rng)
    output_ids = list(input_ids)
    positions = []
    for word in chosen:
        for position in word:
            if rng.random() < 0.8:
                output_ids[position] = options.mask_id
            elif rng.random() >= 0.5:
                output_ids[position] = _random_id(rng, options)
            positions.append(position)
    positions.sort()
    return output_ids, positions, [input_ids[p] for p in positions]


def _choose_positions(input_ids, options, num_to_predict, rng):
    """Up to num_to_predict distinct non-special positions, uniformly, as 1-position words.

    Rejection sampling: far fewer draws than shuffling every candidate, same distribution.
    """
    special = (options.cls_id, options.sep_id)
    num_candidates = len(input_ids) - sum(input_ids.count(s) for s in set(special))
    wanted = min(num_to_predict, num_candidates)
    length = len(input_ids)
    random = rng.random
    chosen = set()
    words = []
    while len(words) < wanted:
        position = int(random() * length)
        if position not in chosen and input_ids[position] not in special:
            chosen.add(position)
            words.append((position,))
    return words


def _choose_whole_words(words, num_to_predict, rng):
    """Words in a uniformly random order, skipping any that would overshoot num_to_predict."""
    chosen = []
    num_chosen = 0
    # Partial Fisher-Yates: words[k] is the k-th word of a uniformly random order.
    for k in range(len(words)):
        if num_chosen >= num_to_predict:
            break
        j = k + _below(rng, len(words) - k)
        words[k], words[j] = words[j], words[k]
        if num_chosen + len(words[k]) <= num_to_predict:
            chosen.append(words[k])
            num_chosen += len(words[k])
    return chosen


def _whole_words(input_ids, options):
    """Lists of positions masked together: a non-special id and the "##" ids right after it."""
    special = (options.cls_id, options.sep_id)
    words = []
    previous = -2
    for position, token_id in enumerate(input_ids):
        if token_id in special:
            continue
        if previous == position - 1 and token_id in options.subword_ids:
            words[-1].append(position)
        else:
            words.append([position])
        previous = position
    return words


def _random_id(rng, options):
    """A uniformly drawn token id of the vocab."""
    if options.replacement_ids is None:
        return _below(rng, options.vocab_size)
    return options.replacement_ids[_below(rng, len(options.replacement_ids))]


def _below(rng, n):
    """A uniform integer in [0, n): `rng.randrange(n)` at a fraction of its cost (n << 2**53)."""
    return int(rng.random() * n)
