"""Running the top-level absl scripts as installed console commands (`bert-run-pretraining`, ...)."""

import sys

from absl import app, flags

from bert_tf.errors import InputError


def run(main, module_name):
    """`app.run(main)`, with the flags of `module_name` shown by `--helpshort` and `--help`.

    absl lists the flags of the module that `sys.argv[0]` names. For a console command that is the
    command's own wrapper (e.g. `.venv/bin/bert-run-pretraining`), which defines no flags, so the
    script module's flags are registered under that name as well.

    An `InputError` from `main` (bad data or settings, with the file and line in its message) ends the
    program with that one line on stderr and exit status 1, not a traceback.
    """
    for flag in flags.FLAGS.get_key_flags_for_module(module_name):
        flags.FLAGS.register_key_flag_for_module(sys.argv[0], flag)

    def main_with_input_errors(argv):
        try:
            return main(argv)
        except InputError as error:
            sys.exit(f"error: {error}")

    app.run(main_with_input_errors)
