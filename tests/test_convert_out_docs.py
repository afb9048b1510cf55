"""docs/formats.md is the output of bert_tf/formats/formats_doc.py: the name tables cannot drift from the code's."""

from bert_tf.formats import formats_doc

from conftest import REPO_DIR


def test_formats_page_is_generated_from_the_code_s_tables():
    page = (REPO_DIR / "docs" / "formats.md").read_text(encoding="utf-8")
    assert page == formats_doc.formats_markdown(), (
        "docs/formats.md is stale: python -m bert_tf.formats.formats_doc > docs/formats.md"
    )


def test_the_name_table_lists_every_head_with_its_transformers_name():
    rows = {row[0].strip("`"): row for row in formats_doc.name_rows()}
    assert rows["cls/squad/output_weights"][1] == "`qa_outputs.weight`"
    assert rows["bert/encoder/layer_0/attention/self/query/kernel"][2] == "yes"
    assert rows["output_weights"][3] == "`layers/dense/vars/0` (task.weights.h5, transposed)"
