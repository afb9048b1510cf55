"""The official SQuAD v1.1 / v2.0 evaluation, with the official evaluate-v2.0.py command line.

    python evaluate_squad.py dev-v2.0.json predictions.json --na-prob-file null_odds.json
    python evaluate_squad.py dev-v1.1.json predictions.json

Prints the official v2.0 script's JSON (percent; on v1.1 data the v1.1 script's "exact_match" and "f1"
lead the dict) or writes it to --out-file. The scoring is bert_tf/squad_evaluation.py.
"""

import argparse
import json
import sys

from bert_tf import file_io, squad_evaluation
from bert_tf.errors import InputError


def _parser():
    parser = argparse.ArgumentParser(
        prog="evaluate_squad.py",
        description="Official evaluation for SQuAD v1.1 and v2.0 (exact match and F1, in percent).",
    )
    parser.add_argument("data_file", metavar="data.json", help="SQuAD data JSON file.")
    parser.add_argument(
        "pred_file", metavar="pred.json", help="Model predictions: {question id: answer text}."
    )
    parser.add_argument(
        "--out-file",
        "-o",
        metavar="eval.json",
        help="Write the scores to this file (written whole or not at all); default: stdout.",
    )
    parser.add_argument(
        "--na-prob-file",
        "-n",
        metavar="na_prob.json",
        help="Model estimates of the probability (or score) of no answer: {question id: number}, "
        "e.g. run_squad.py's null_odds.json. Adds best_exact / best_f1 and their thresholds.",
    )
    parser.add_argument(
        "--na-prob-thresh",
        "-t",
        type=float,
        default=1.0,
        help='Predict "" if the no-answer probability exceeds this (default = 1.0).',
    )
    parser.add_argument(
        "--out-image-dir",
        "-p",
        metavar="out_images",
        default=None,
        help="Precision-recall plots: not supported here (use the official script for them).",
    )
    parser.add_argument(
        "--verbose", "-v", action="store_true", help="Accepted for compatibility; no effect."
    )
    return parser


def _write_json_atomically(path, value):
    """Writes `value` as JSON to `path` (bert_tf.file_io.atomic_write: whole or not at all)."""
    try:
        file_io.write_text(path, json.dumps(value))
    except OSError as error:
        raise InputError(f"{path}: cannot write it: {error.strerror or error}") from None


def _run(args):
    if args.out_image_dir:
        raise InputError(
            "--out-image-dir (precision-recall plots) is not supported; run without it for the "
            "scores, or use the official evaluate-v2.0.py for the plots"
        )
    dataset_json = squad_evaluation.load_json(args.data_file)
    predictions = squad_evaluation.load_json(args.pred_file)
    na_probs = squad_evaluation.load_json(args.na_prob_file) if args.na_prob_file else None
    results = squad_evaluation.evaluate(
        dataset_json,
        predictions,
        na_probs,
        args.na_prob_thresh,
        sources=(args.data_file, args.pred_file, args.na_prob_file),
    )
    if args.out_file:
        _write_json_atomically(args.out_file, results)
    else:
        print(json.dumps(results, indent=2))


def main(argv=None):
    """Runs the evaluation; returns the exit status (0, or 1 after a one-line error on stderr).

    Args:
      argv: the arguments without the program name; None reads sys.argv.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = _parser()
    if not argv:  # as the official script: no arguments prints the help
        parser.print_help()
        return 1
    args = parser.parse_args(argv)
    try:
        _run(args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


def cli():
    """The `bert-evaluate-squad` console command."""
    sys.exit(main())


if __name__ == "__main__":
    cli()
