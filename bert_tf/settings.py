"""Settings dataclasses whose fields are also the scripts' absl flags: each flag is declared once.

A run's settings travel as a dataclass (so tasks run the same from flags, tests and bench/), and each of
its `setting` fields declares the flag of the same name, its default and its help text. A script calls
`define_flags(ItsSettings, __name__)` and later `from_flags(ItsSettings)`.

A flag several scripts take is declared once (bert_tf/shared_settings.py) and their settings classes
derive from its class. A script whose use of it differs declares the field again in its own class, type
and all, with `restated`: its own default or help, the rest of the flag the base's. A class's flags are
its fields as `dataclasses` collects them; no hook rewrites them.

Example:
```python
@dataclasses.dataclass(kw_only=True)
class LayerSettings(VocabFileSetting):
    layers: str = setting("-1,-2,-3,-4", "Encoder layers to write (negative: from the top).")
    batch_size: int = setting(32, "Lines per forward pass.")
    vocab_file: str | None = restated(VocabFileSetting, "vocab_file", help="The model's vocab.txt.")

define_flags(LayerSettings, __name__)        # --layers, --batch_size, --vocab_file (--helpshort)
settings = from_flags(LayerSettings)         # after absl parsed the command line
```
"""

import dataclasses
import sys
import types
import typing

from absl import flags


def setting(
    default,
    help,
    *,
    choices=None,
    sweep=False,
    recorded=False,
    recorded_default=dataclasses.MISSING,
):
    """A dataclass field that declares a flag: its default, its help text and, for an enum, its choices.

    sweep: the flag takes one value or several, comma-separated; with several the parsed field
      holds a tuple of them (a hyper-parameter sweep, bert_tf/tasks/sweep.py).
    recorded: the run's value is also its task's part of task.json (`recorded_settings`), which
      its export and a later --init_checkpoint read back.
    recorded_default: what a task.json that lacks the setting (or holds null) reads as, when that
      is not the flag's default.
    """
    metadata = {"help": help, "choices": choices, "sweep": sweep, "recorded": recorded}
    if recorded_default is not dataclasses.MISSING:
        metadata["recorded_default"] = recorded_default
    return dataclasses.field(default=default, metadata=metadata)


def derived(default, doc):
    """A field that is no flag: the run derives its value (from its data, ...) and records it in
    task.json as `setting(..., recorded=True)` does; `doc` says what it is."""
    return dataclasses.field(default=default, metadata={"doc": doc, "recorded": True})


def recorded_fields(settings_class):
    """The fields of `settings_class` recorded in task.json (`setting(recorded=True)`, `derived`)."""
    return [field for field in dataclasses.fields(settings_class) if field.metadata.get("recorded")]


def recorded_settings(settings_class, **values):
    """A task's recorded settings (its part of task.json): a namespace of `settings_class`'s recorded
    fields, or None when it has none.

    Each field is `values`' or, when missing or None, its `recorded_default` (else the flag's
    default): a task.json that lacks a setting, or holds null, reads as that default.

    Raises:
      ValueError: for a name that is no recorded field, or a value outside a setting's choices.
    """
    fields = recorded_fields(settings_class)
    if not fields:
        return None
    unknown = sorted(set(values) - {field.name for field in fields})
    if unknown:
        raise ValueError(f"unknown settings {unknown} (known: {[f.name for f in fields]})")
    settings = {}
    for field in fields:
        value = values.get(field.name)
        if value is None:
            value = field.metadata.get("recorded_default", field.default)
        allowed = field.metadata.get("choices")
        if value is not None and allowed and value not in allowed:
            raise ValueError(f"{field.name} {value!r} is none of {', '.join(allowed)}")
        settings[field.name] = value
    return types.SimpleNamespace(**settings)


def restated(base, name, default=dataclasses.MISSING, *, help=None, sweep=None):
    """A class's own declaration of the flag `name` of `base`, with its default, help or sweep changed.

    The class declares the field with its type, as `base` does, and this as its value; the rest of
    the flag (its choices, whether it is recorded) is `base`'s:

        doc_stride: int | None = restated(DocStrideSetting, "doc_stride", 128, help="...")

    Raises:
      TypeError: when `base` has no flag `name`.
    """
    fields = {field.name: field for field in flag_fields(base)}
    if name not in fields:
        raise TypeError(f"restated: {base.__name__} has no flag {name!r}")
    metadata = dict(fields[name].metadata)
    if help is not None:
        metadata["help"] = help
    if sweep is not None:
        metadata["sweep"] = sweep
    default = fields[name].default if default is dataclasses.MISSING else default
    return dataclasses.field(default=default, metadata=metadata)


def flag_fields(settings_class):
    """The fields of `settings_class` that are flags (declared with `setting`)."""
    return [field for field in dataclasses.fields(settings_class) if "help" in field.metadata]


def _flag_type(annotation):
    """bool, int, float or str, from a field's annotation (`int | None` -> int)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kinds = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(kinds) != 1:
            raise TypeError(f"a flag field needs one type, got {annotation}")
        annotation = kinds[0]
    if annotation not in (bool, int, float, str):
        raise TypeError(f"a flag field is bool, int, float or str, got {annotation}")
    return annotation


_DEFINE = {
    bool: flags.DEFINE_bool,
    int: flags.DEFINE_integer,
    float: flags.DEFINE_float,
    str: flags.DEFINE_string,
}


def script_module_name(module_name):
    """The name absl files a script's flags under: its path (sys.argv[0]) when it runs as __main__."""
    return sys.argv[0] if module_name == "__main__" else module_name


def define_flags(settings_class, module_name, flag_values=flags.FLAGS, **defaults):
    """Declares one absl flag per `setting` field of `settings_class`, as key flags of `module_name`.

    Args:
      settings_class: a dataclass whose flag fields were declared with `setting`.
      module_name: the script's `__name__`; its --helpshort lists these flags.
      flag_values: the absl FlagValues to declare them in.
      **defaults: a script's own defaults for some flags (e.g. max_seq_length=384 for SQuAD).
    """
    unknown = sorted(set(defaults) - {field.name for field in flag_fields(settings_class)})
    if unknown:
        raise ValueError(f"{settings_class.__name__} has no flag fields {unknown}")
    module_name = script_module_name(module_name)
    hints = typing.get_type_hints(settings_class)
    for field in flag_fields(settings_class):
        default = defaults.get(field.name, field.default)
        options = dict(flag_values=flag_values, module_name=module_name)
        if field.metadata["sweep"]:
            flags.DEFINE_string(
                field.name,
                None if default is None else str(default),
                field.metadata["help"] + " Several comma-separated values make a sweep.",
                **options,
            )
        elif field.metadata["choices"]:
            flags.DEFINE_enum(
                field.name, default, field.metadata["choices"], field.metadata["help"], **options
            )
        else:
            _DEFINE[_flag_type(hints[field.name])](
                field.name, default, field.metadata["help"], **options
            )


def parse_sweep(name, text, kind):
    """A sweep flag's text -> its value, or a tuple of values when it lists several.

    Raises:
      InputError: naming the flag, for a value that is not a `kind` or one listed twice.
    """
    from bert_tf.errors import InputError

    if text is None or not str(text).strip():
        return None
    values = []
    for part in str(text).split(","):
        try:
            value = kind(part.strip())
        except ValueError:
            raise InputError(
                f"--{name}={text}: {part.strip()!r} is not a {kind.__name__}"
            ) from None
        if value in values:
            raise InputError(f"--{name}={text}: {value} is listed twice")
        values.append(value)
    return values[0] if len(values) == 1 else tuple(values)


def from_flags(settings_class, flag_values=flags.FLAGS, **values):
    """An instance of `settings_class` from the parsed flags of its fields; `values` override some."""
    hints = typing.get_type_hints(settings_class)
    parsed = {}
    for field in flag_fields(settings_class):
        value = flag_values[field.name].value
        if field.metadata["sweep"]:
            value = parse_sweep(field.name, value, _flag_type(hints[field.name]))
        parsed[field.name] = value
    return settings_class(**{**parsed, **values})
