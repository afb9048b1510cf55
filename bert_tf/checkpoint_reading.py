"""Reading a checkpoint's files, with damage named: a truncated or altered `.index` or `.data-*`
file is one `DamagedCheckpoint` line naming the file, not TensorFlow's traceback (`not an sstable`,
`Read less bytes than requested`, `Checksum does not match`).

`open_checkpoint` reads the index (the names and shapes); `verify_checkpoint` also reads every
tensor, whose checksums then tell a flipped bit in the data.
"""

import contextlib
import re

import tensorflow as tf

from bert_tf.errors import DamagedCheckpoint

# What TensorFlow's messages say about a damaged bundle, by the words that name the damage (the
# first found wins: an altered index says "Perhaps the file is corrupt ... block checksum mismatch").
_DAMAGE = [
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"not an sstable[^.;:]*",
        r"read less bytes than requested",
        r"(block )?checksum (does not match|mismatch)",
        r"truncated[^.;:]*",
        r"data loss[^.;:]*",
        r"corrupt[^.;:]*",
    )
]


def _files(prefix, part):
    """The file of `part` ("index" or "data"): its path, or the shards' pattern when there are several."""
    if part == "index":
        return prefix + ".index"
    shards = tf.io.gfile.glob(prefix + ".data-*")
    return shards[0] if len(shards) == 1 else prefix + ".data-*"


def _reason(error):
    message = str(error)
    for pattern in _DAMAGE:
        found = pattern.search(message)
        if found:
            return found.group(0)
    first = next((line for line in message.splitlines() if line.strip()), type(error).__name__)
    return first.strip()[:120]


@contextlib.contextmanager
def naming_damage(prefix, part):
    """Turns a read error of the checkpoint at `prefix` into DamagedCheckpoint naming its file.

    Args:
      prefix: the checkpoint prefix.
      part: "index" (the names and shapes) or "data" (the values).
    """
    try:
        yield
    except (tf.errors.OpError, IndexError) as error:
        raise DamagedCheckpoint(
            f"{_files(prefix, part)}: the checkpoint {prefix} is damaged ({_reason(error)}): "
            "truncated or altered since it was written; use an intact copy or another checkpoint"
        ) from None


def open_checkpoint(prefix):
    """tf.train.load_checkpoint(prefix), its index read.

    Raises:
      DamagedCheckpoint: the index cannot be read, naming it.
    """
    with naming_damage(prefix, "index"):
        return tf.train.load_checkpoint(prefix)


def read_tensor(reader, prefix, key):
    """reader.get_tensor(key), a damaged data file named (DamagedCheckpoint)."""
    with naming_damage(prefix, "data"):
        return reader.get_tensor(key)


def verify_checkpoint(prefix):
    """Reads every tensor of the checkpoint at `prefix`, one at a time (their checksums checked).

    Returns:
      the checkpoint's reader (open_checkpoint).

    Raises:
      DamagedCheckpoint: naming the file that is truncated or altered.
    """
    reader = open_checkpoint(prefix)
    for key in sorted(reader.get_variable_to_shape_map()):
        read_tensor(reader, prefix, key)
    return reader
