"""Running the top-level absl scripts as installed console commands (`bert-run-pretraining`, ...)."""

import sys

from absl import app, flags


def run(main, module_name):
    """`app.run(main)`, with the flags of `module_name` shown by `--helpshort` and `--help`.

    absl lists the flags of the module that `sys.argv[0]` names. For a console command that is the
    command's own wrapper (e.g. `.venv/bin/bert-run-pretraining`), which defines no flags, so the
    script module's flags are registered under that name as well.
    """
    for flag in flags.FLAGS.get_key_flags_for_module(module_name):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)
    app.run(main)
