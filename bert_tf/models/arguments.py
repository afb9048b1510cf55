"""Checks of the Keras models' arguments, and label names to label ids.

Every public constructor and `from_preset` of bert_tf/models checks its arguments here before any
work: a wrong one is one `ValueError` that names the argument, the value given and what is allowed
("max_seq_length must be an integer of at least 2, got 3.5"). A bool is not an integer here, nor
is a float that happens to be whole, nor a string of digits: Python would take them silently.

N = texts, L = labels.
"""

import os

import numpy as np

from bert_tf.modeling import BertConfig


def _shown(value, limit=80):
    """repr(value), cut to `limit` characters (a message stays one readable line)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def integer(name, value, minimum=None, *, optional=False):
    """`value` as an int, at least `minimum` (None: any); None passes when `optional`."""
    if value is None and optional:
        return None
    if minimum is None:
        allowed = "an integer"
    elif minimum == 1:
        allowed = "a positive integer"
    else:
        allowed = f"an integer of at least {minimum}"
    is_int = isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
    if not is_int or (minimum is not None and value < minimum):
        raise ValueError(f"{name} must be {allowed}, got {_shown(value)}")
    return int(value)


def at_most(name, value, maximum, why):
    """`value` (an int already checked) no more than `maximum`; `why` says what the bound is."""
    if value is not None and value > maximum:
        raise ValueError(f"{name}={value} must be at most {why} = {maximum}")
    return value


def number(name, value, low=None, high=None, *, low_inclusive=True, high_inclusive=True):
    """`value` (an int or float, not a bool) as a float in the range [low, high] ("(" with an
    exclusive end; None: unbounded)."""
    is_number = isinstance(value, int | float | np.integer | np.floating) and not isinstance(
        value, bool | np.bool_
    )
    inside = is_number and np.isfinite(value)
    if inside and low is not None:
        inside = value >= low if low_inclusive else value > low
    if inside and high is not None:
        inside = value <= high if high_inclusive else value < high
    if not inside:
        raise ValueError(
            f"{name} must be {_range_text(low, high, low_inclusive, high_inclusive)}, got {_shown(value)}"
        )
    return float(value)


def _range_text(low, high, low_inclusive, high_inclusive):
    if low == 0 and high is None:
        return "a number above 0" if not low_inclusive else "a number of at least 0"
    if high is None:
        return f"a number {'of at least' if low_inclusive else 'above'} {low}"
    left, right = "[" if low_inclusive else "(", "]" if high_inclusive else ")"
    return f"a number in {left}{low}, {high}{right}"


def boolean(name, value, *, optional=False):
    """`value` as a bool: True or False (None passes when `optional`)."""
    if value is None and optional:
        return None
    if not isinstance(value, bool | np.bool_):
        allowed = "True, False or None" if optional else "True or False"
        raise ValueError(f"{name} must be {allowed}, got {_shown(value)}")
    return bool(value)


def choice(name, value, choices, *, optional=False):
    """`value`, one of `choices` (None passes when `optional`)."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {_shown(value)}")
    return value


def path(name, value, *, optional=False):
    """`value` (a str or os.PathLike) as a str."""
    if value is None and optional:
        return None
    if not isinstance(value, str | os.PathLike) or not os.fspath(value):
        raise ValueError(f"{name} must be a path (a str or os.PathLike), got {_shown(value)}")
    return os.fspath(value)


def string_list(name, value, minimum_count=1):
    """`value`, a list or tuple of distinct strings (at least `minimum_count`), as a list of str."""
    if not isinstance(value, list | tuple | np.ndarray) or len(value) < minimum_count:
        allowed = {0: "a list of strings", 1: "a non-empty list of strings"}.get(
            minimum_count, f"a list of at least {minimum_count} strings"
        )
        raise ValueError(f"{name} must be {allowed}, got {_shown(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise ValueError(f"{name}[{index}] must be a string, got {item!r}")
    seen = set()
    for item in value:
        if item in seen:
            raise ValueError(f"{name} names {item!r} twice: each once, in id order")
        seen.add(item)
    return list(value)


def vocabulary(value):
    """A vocab.txt path (as a str) or the tokens in id order (a list of str)."""
    if isinstance(value, str | os.PathLike):
        return path("vocabulary", value)
    if isinstance(value, list | tuple):
        return string_list("vocabulary", value)
    raise ValueError(
        f"vocabulary must be a vocab.txt path or a list of tokens in id order, got {_shown(value)}"
    )


def bert_config(value):
    """A BertConfig, or one of a dict of bert_config.json keys."""
    if isinstance(value, BertConfig):
        return value
    if not isinstance(value, dict):
        raise ValueError(
            f"bert_config must be a BertConfig or a dict of bert_config.json keys, got {_shown(value)}"
        )
    try:
        return BertConfig.from_dict(value)
    except (TypeError, ValueError) as error:
        raise ValueError(f"bert_config: {error}") from None


def known_keywords(name, given, known):
    """Refuses a keyword argument of `given` (a dict) not in `known`, naming it."""
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ValueError(
            f"{name}: unknown argument {unknown[0]!r}; the arguments are {list(known)}"
        )


# ------------------------------------------------------------------------------- label names


def _is_text(value):
    return isinstance(value, str | bytes | np.str_ | np.bytes_)


def label_ids(y, labels, default_labels, argument="y"):
    """y with label names mapped to their index in `labels`; y unchanged without names.

    Args:
      y: the labels as given to fit or evaluate: ids, or names (str) of `labels`.
      labels: the model's label strings in id order.
      default_labels: whether `labels` are the defaults "0", "1", ... (no labels= given).

    Raises:
      ValueError: names mixed with numbers; a name not in `labels` (with default labels: pass
        labels=[...]).
    """
    if y is None or _is_text(y) or not isinstance(y, list | tuple | np.ndarray):
        return y
    array = np.asarray(y, dtype=object)
    items = list(array.reshape(-1))
    if not any(_is_text(item) for item in items):
        return y
    if array.ndim != 1:
        raise ValueError(
            f"{argument}: one label name per text, got an array of shape {array.shape}"
        )
    index_of = {name: index for index, name in enumerate(labels)}
    ids = []
    for position, item in enumerate(items):
        name = item.decode() if isinstance(item, bytes | np.bytes_) else item
        if not _is_text(item) or str(name) not in index_of:
            raise ValueError(_unknown_label(argument, position, item, labels, default_labels))
        ids.append(index_of[str(name)])
    return np.array(ids, np.int32)


def _unknown_label(argument, position, item, labels, default_labels):
    where = f"{argument}[{position}] = {item!r}"
    if not _is_text(item):
        return f"{where}: give every label as a name of labels=, or every label as an id"
    if default_labels:
        return (
            f"{where} is a label name, but this model has no labels= (its labels are "
            f"{labels}): pass labels=[...] naming every label, in id order"
        )
    return f"{where} is not one of labels={labels}"


def label_rows(y, labels, default_labels, argument="y"):
    """Multi-label y with a list of label names per text as rows of 0 and 1, float32 [N, L]; y
    unchanged unless every row is a list of names (see label_ids for the errors)."""
    if not isinstance(y, list | tuple) or not y:
        return y
    is_named = [
        isinstance(row, list | tuple | set | frozenset) and all(_is_text(item) for item in row)
        for row in y
    ]
    if not any(is_named[i] and len(row) for i, row in enumerate(y)):
        return y
    targets = np.zeros([len(y), len(labels)], np.float32)
    for position, row in enumerate(y):
        where = f"{argument}[{position}]"
        if not is_named[position]:
            raise ValueError(f"{where} = {_shown(row)}: give every text a list of label names")
        targets[position, label_ids(list(row), labels, default_labels, where)] = 1.0
    return targets


# ----------------------------------------------------------------------------- saved configs


class RefusedConfig(ValueError):
    """A saved config that bert_tf's save did not write."""


def from_saved_config(cls, config, build):
    """`build(**config)`: a class of bert_tf/models from the config a saved file holds.

    A config bert_tf's `save` did not write (a .keras file tampered with, or of other code) is
    refused in one RefusedConfig (a ValueError) that says so and why, whatever refused it: an
    argument's check here, or Keras' safe_mode (a lambda, a function or class it will not load).
    """
    if not isinstance(config, dict):
        raise RefusedConfig(_refusal(cls, f"the config is a {type(config).__name__}, not a dict"))
    try:
        return build(**config)
    except RefusedConfig:
        raise
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise RefusedConfig(_refusal(cls, _cause(error))) from None


def _refusal(cls, cause):
    return (
        f"{cls.__name__}: the saved model's config was refused (safe_mode: only what bert_tf's "
        f"save writes loads; was the .keras file changed?): {cause}"
    )


def _cause(error, limit=300):
    """The first line of what refused a config, without the whole config Keras appends."""
    text = str(error).rsplit("Exception encountered:", 1)[-1]
    text = text.split("Full object config:", 1)[0].split("Full config:", 1)[0]
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
