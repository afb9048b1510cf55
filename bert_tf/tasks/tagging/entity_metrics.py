"""Entity-level scores of a tagger: precision, recall and F1 over entities as CoNLL's `conlleval`
script counts them (and seqeval's strict mode for IOB2 / IOBES), per entity type and overall.

Pure Python (no TensorFlow); run_ner.py's eval (tasks/tagging/task.py) reports them.
"""

_SCHEME_PREFIXES = {
    "auto": frozenset("BIES"),
    "iob1": frozenset("BI"),
    "iob2": frozenset("BI"),
    "iobes": frozenset("BIES"),
}
_OUTSIDE = ("O", "")


def _parse_label(label, allowed_prefixes, where):
    """'B-PER' -> ('B', 'PER'); 'O' -> ('O', ''); a bare 'B' -> ('B', '') (an untyped chunk)."""
    if label == "O":
        return _OUTSIDE
    prefix, _, entity_type = str(label).partition("-")
    if prefix not in allowed_prefixes:
        allowed = ", ".join(f"{p}-" for p in sorted(allowed_prefixes))
        raise ValueError(f"{where}: label {label!r} is neither 'O' nor starts with {allowed}")
    return prefix, entity_type


def _chunk_ends(previous, current):
    """Whether a chunk ends between two tokens, by conlleval's rules (with IOBES's S- as well).

    Args:
      previous, current: (prefix, type) of the previous and the current token.
    """
    (prev_prefix, prev_type), (prefix, entity_type) = previous, current
    if prev_prefix == "O":
        return False
    return (
        prev_prefix in "ES"  # E- and S- close their chunk
        or prefix in "BSO"  # B- / S- open a new chunk, O is outside
        or prev_type != entity_type
    )


def _chunk_starts(previous, current):
    """Whether a chunk starts at the current token, by conlleval's rules (with IOBES's S- as well)."""
    (prev_prefix, prev_type), (prefix, entity_type) = previous, current
    if prefix == "O":
        return False
    return (
        prefix in "BS"
        or prev_prefix in "OES"  # I- or E- after O or after a closed chunk: IOB1 / IOE starts
        or prev_type != entity_type
    )


def _conlleval_entities(tags):
    """Chunks as conlleval finds them: any run of I- may start one, so ill-formed runs still count.

    Args:
      tags: [(prefix, type)] of one sentence.

    Returns:
      A set of (type, start, end), end exclusive.
    """
    entities = set()
    previous, start = _OUTSIDE, 0
    for index, current in enumerate([*tags, _OUTSIDE]):
        if _chunk_ends(previous, current):
            entities.add((previous[1], start, index))
        if _chunk_starts(previous, current):
            start = index
        previous = current
    return entities


def _strict_entities(tags, scheme):
    """Only well-formed chunks (seqeval's mode="strict"): IOB2 B-X I-X*; IOBES S-X or B-X I-X* E-X.

    A run that breaks the scheme (an I- that continues nothing, a B- never closed by E- in IOBES) is no
    entity at all.
    """
    entities = set()
    index = 0
    while index < len(tags):
        prefix, entity_type = tags[index]
        if prefix not in "BS":
            index += 1
            continue
        end = index + 1
        if prefix == "B":
            # B-X takes the I-X after it and, in IOBES, the E-X that closes it.
            continuations = "I" if scheme == "iob2" else "IE"
            while end < len(tags) and tags[end][0] in continuations and tags[end][1] == entity_type:
                end += 1
                if tags[end - 1][0] == "E":
                    break
        closed = scheme == "iob2" or tags[end - 1][0] in "ES"
        if closed:
            entities.add((entity_type, index, end))
        index = end
    return entities


def extract_entities(labels, scheme="auto"):
    """The entities of one label sequence.

    Args:
      labels: one sentence's labels, e.g. ["B-PER", "I-PER", "O", "S-LOC"].
      scheme: how chunks are read, see `conll_entity_metrics`.

    Returns:
      A sorted list of (type, start, end) with end exclusive: labels[start:end] is the entity.
    """
    if scheme not in _SCHEME_PREFIXES:
        raise ValueError(f"scheme must be one of {sorted(_SCHEME_PREFIXES)}, got {scheme!r}")
    tags = [
        _parse_label(label, _SCHEME_PREFIXES[scheme], f"position {i}")
        for i, label in enumerate(labels)
    ]
    return sorted(_entities_of_tags(tags, scheme), key=lambda e: (e[1], e[2], e[0]))


def _entities_of_tags(tags, scheme):
    if scheme in ("iob2", "iobes"):
        return _strict_entities(tags, scheme)
    return _conlleval_entities(tags)


def _precision_recall_f1(num_correct, num_predicted, num_gold):
    """conlleval's arithmetic, as fractions: each score is 0.0 where its denominator is 0."""
    precision = num_correct / num_predicted if num_predicted else 0.0
    recall = num_correct / num_gold if num_gold else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "support": num_gold,
        "num_predicted": num_predicted,
        "num_correct": num_correct,
    }


def conll_entity_metrics(gold_sequences, predicted_sequences, scheme="auto"):
    """Entity-level precision, recall and F1 as the CoNLL shared tasks' `conlleval` script counts them.

    An entity is correct only when its type and both boundaries match a gold entity. Schemes:
      - "auto" (default) and "iob1": conlleval's chunk rules, which read IOB1, IOB2 and IOBES alike
        (plus IOE): a chunk starts at B- or S-, at an I- / E- after O or after a closed chunk, and at a
        change of type; it ends before B- / S- / O, after E- / S-, and at a change of type. So in IOB1
        "I-PER I-PER B-PER" is two PER entities, and an ill-formed "O I-PER" still counts as one.
        "iob1" also refuses E- and S- labels.
      - "iob2", "iobes": strict, as seqeval's mode="strict": only well-formed chunks count (IOB2 B-X I-X*;
        IOBES S-X or B-X I-X* E-X); an I- that continues nothing is not an entity.

    Args:
      gold_sequences: a list of sentences, each a list of word-level labels ("O", "B-PER", "I-LOC", ...).
      predicted_sequences: the predicted labels, same shape.
      scheme: "auto", "iob1", "iob2" or "iobes".

    Returns:
      {"precision", "recall", "f1": micro-averaged over all entities (fractions, 0.0 where undefined,
      as conlleval), "support": gold entities, "num_predicted", "num_correct": entity counts,
      "accuracy": the fraction of tokens whose label is right (0.0 for no tokens), "num_tokens",
      "per_type": {type: {"precision", "recall", "f1", "support", "num_predicted", "num_correct"}} for
      every type in the gold or the predicted labels, sorted by type}.

    Raises:
      ValueError: the sentence counts or a sentence's lengths differ, an unknown scheme, or a label the
        scheme does not have (the message names the sentence, position and label).
    """
    if scheme not in _SCHEME_PREFIXES:
        raise ValueError(f"scheme must be one of {sorted(_SCHEME_PREFIXES)}, got {scheme!r}")
    if len(gold_sequences) != len(predicted_sequences):
        raise ValueError(
            f"{len(gold_sequences)} gold sentences but {len(predicted_sequences)} predicted ones"
        )
    allowed = _SCHEME_PREFIXES[scheme]
    gold_counts, predicted_counts, correct_counts = {}, {}, {}  # {type: number of entities}
    num_tokens = num_right_tokens = 0
    for sentence, (gold_labels, predicted_labels) in enumerate(
        zip(gold_sequences, predicted_sequences, strict=True)
    ):
        if len(gold_labels) != len(predicted_labels):
            raise ValueError(
                f"sentence {sentence}: {len(gold_labels)} gold labels but "
                f"{len(predicted_labels)} predicted ones"
            )
        gold_tags = [
            _parse_label(label, allowed, f"sentence {sentence} position {i} (gold)")
            for i, label in enumerate(gold_labels)
        ]
        predicted_tags = [
            _parse_label(label, allowed, f"sentence {sentence} position {i} (predicted)")
            for i, label in enumerate(predicted_labels)
        ]
        num_tokens += len(gold_tags)
        num_right_tokens += sum(g == p for g, p in zip(gold_tags, predicted_tags, strict=True))
        gold_entities = _entities_of_tags(gold_tags, scheme)
        predicted_entities = _entities_of_tags(predicted_tags, scheme)
        for counts, entities in (
            (gold_counts, gold_entities),
            (predicted_counts, predicted_entities),
            (correct_counts, gold_entities & predicted_entities),
        ):
            for entity_type, _, _ in entities:
                counts[entity_type] = counts.get(entity_type, 0) + 1

    results = _precision_recall_f1(
        sum(correct_counts.values()), sum(predicted_counts.values()), sum(gold_counts.values())
    )
    results["accuracy"] = num_right_tokens / num_tokens if num_tokens else 0.0
    results["num_tokens"] = num_tokens
    results["per_type"] = {
        entity_type: _precision_recall_f1(
            correct_counts.get(entity_type, 0),
            predicted_counts.get(entity_type, 0),
            gold_counts.get(entity_type, 0),
        )
        for entity_type in sorted(gold_counts.keys() | predicted_counts.keys())
    }
    return results
