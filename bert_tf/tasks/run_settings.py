"""The checks of the training scripts' settings that need the model's, the export's or the training
loop's modules; the flags themselves are bert_tf/shared_settings.py's (RunSettings, FineTuningSettings).

shared_settings.py sits below the model (docs/architecture.md's layers), so the checks that apply
those modules' rules are here, in the tasks layer: `check_learning_rates` (every training script's
settings) and TaskSettings, from which every fine-tuning script's settings derive
(tasks/task_settings.py). TaskSettings declares no flag.
"""

import dataclasses

from bert_tf.adapters import check_lora_arguments
from bert_tf.errors import InputError
from bert_tf.export import check_export_dir
from bert_tf.shared_settings import LORA_TARGETS, FineTuningSettings, sweep_values
from bert_tf.tokenization import validate_case_matches_checkpoint
from bert_tf.training.train_settings import check_learning_rate_value


def check_learning_rates(settings):
    """Raises InputError naming --learning_rate unless each of its values is positive and finite."""
    for rate in sweep_values(settings.learning_rate):
        check_learning_rate_value(rate)


@dataclasses.dataclass(kw_only=True)
class TaskSettings(FineTuningSettings):
    """FineTuningSettings with the checks that need the model's modules; no flag of its own."""

    def check(self):
        """FineTuningSettings.check, then the learning rates, the casing of a Google release, the
        LoRA flags and --export_dir.

        Raises:
          InputError: naming the flag.
        """
        super().check()
        check_learning_rates(self)
        validate_case_matches_checkpoint(self.do_lower_case, self.init_checkpoint)
        self.lora_targets()
        if self.export_dir:
            check_export_dir(self.export_dir)

    def lora_targets(self):
        """(rank, target names) of --lora_rank and --lora_target_names, or None (LoRA off).

        Raises:
          InputError: naming the flag, for a negative rank or an unknown target name.
        """
        rank = self.lora_rank
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise InputError(f"--lora_rank must be 0 (off) or a positive integer, got {rank!r}")
        names = [name.strip() for name in (self.lora_target_names or "").split(",")]
        try:
            targets = check_lora_arguments(max(rank, 1), [name for name in names if name])
        except ValueError:
            raise InputError(
                f"--lora_target_names={self.lora_target_names}: give names of "
                f"{', '.join(LORA_TARGETS)}, comma-separated"
            ) from None
        return targets if rank else None
