"""Classify raw sentences with an exported classifier, in a process that imports only TensorFlow.

The export (export_saved_model.py or run_classifier.py --export_dir) tokenizes in its graph, so a client
needs tensorflow and tensorflow_text (whose import registers the tokenizer's ops), not bert_tf:

    python scripts/classify_with_export.py --export_dir=demo_output/export/1 \
        "It is a truth universally acknowledged." "truth a acknowledged It universally is."

Prints one line per sentence (label and probabilities) and, with --output_file, writes them as JSON:
{"labels": [...], "predictions": [{"text_a": ..., "label": ..., "probabilities": {label: p}}]}.
Pair tasks take "first ||| second" (text_a ||| text_b).
"""

import argparse
import json
import os
import sys

import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the ops of the in-graph tokenizer)

PAIR_SEPARATOR = " ||| "


def classify(export_dir, texts):
    """[(text_a, text_b or None, label, {label: probability})] for the raw `texts`."""
    model = tf.saved_model.load(export_dir)
    serve = model.signatures["serving_default"]
    labels_path = os.path.join(export_dir, "assets", "labels.txt")
    with open(labels_path, encoding="utf-8") as f:
        labels = [line.rstrip("\n") for line in f if line.strip()]
    pairs = [text.split(PAIR_SEPARATOR, 1) if PAIR_SEPARATOR in text else [text] for text in texts]
    inputs = {"text_a": tf.constant([pair[0] for pair in pairs])}
    if "text_b" in serve.structured_input_signature[1]:
        inputs["text_b"] = tf.constant([pair[1] if len(pair) > 1 else "" for pair in pairs])
    outputs = serve(**inputs)
    results = []
    for pair, label, probabilities in zip(
        pairs, outputs["label"].numpy(), outputs["probabilities"].numpy(), strict=True
    ):
        by_label = {name: round(float(p), 4) for name, p in zip(labels, probabilities, strict=True)}
        results.append((pair[0], pair[1] if len(pair) > 1 else None, label.decode(), by_label))
    return labels, results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--export_dir", required=True, help="an export's version folder (…/export/1)"
    )
    parser.add_argument("--output_file", help="also write the predictions here, as JSON")
    parser.add_argument("texts", nargs="+", help='raw sentences; "a ||| b" for pair tasks')
    args = parser.parse_args(argv)
    labels, results = classify(args.export_dir, args.texts)
    assert "bert_tf" not in sys.modules, "the export must serve without bert_tf"
    for text_a, text_b, label, probabilities in results:
        text = text_a if text_b is None else f"{text_a}{PAIR_SEPARATOR}{text_b}"
        shown = "  ".join(f"{name} {p:.3f}" for name, p in probabilities.items())
        print(f"{label:>12}  ({shown})  {text}")
    if args.output_file:
        predictions = [
            {"text_a": a, **({"text_b": b} if b is not None else {}), "label": label,
             "probabilities": probabilities}
            for a, b, label, probabilities in results
        ]  # fmt: skip
        os.makedirs(os.path.dirname(os.path.abspath(args.output_file)), exist_ok=True)
        with open(args.output_file, "w", encoding="utf-8") as f:
            json.dump({"labels": labels, "predictions": predictions}, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
