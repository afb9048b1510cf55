"""The distillation loss: the student's logits against the teacher's, softened, and the labels.

Hinton et al. (2015), "Distilling the Knowledge in a Neural Network": both softmaxes at temperature
T, the soft cross-entropy scaled by T^2 (so its gradients keep their size as T changes), plus the
ordinary loss on the true labels, weighted. A multi-label model softens each label's sigmoid the
same way; a regression model matches the teacher's score (squared error). Texts without a label (the
transfer texts) have a hard weight of 0: only the teacher teaches them.

B = batch, L = labels (1 for regression).
"""

import tensorflow as tf

KINDS = ("single_label", "multi_label", "regression")


def soft_loss(student_logits, teacher_logits, kind, temperature):
    """The per-example loss against the teacher, float32 [B].

    Args:
      student_logits, teacher_logits: float [B, L].
      kind: one of KINDS.
      temperature: T > 0; single- and multi-label divide both logits by it and scale by T^2.
    """
    student = tf.cast(student_logits, tf.float32)
    teacher = tf.cast(teacher_logits, tf.float32)
    if kind == "regression":
        return tf.square(student[:, 0] - teacher[:, 0])
    scale = temperature * temperature
    student, teacher = student / temperature, teacher / temperature
    if kind == "multi_label":
        targets = tf.sigmoid(teacher)
        per_label = tf.nn.sigmoid_cross_entropy_with_logits(targets, student)  # [B, L]
        return scale * tf.reduce_mean(per_label, axis=-1)
    targets = tf.nn.softmax(teacher, axis=-1)
    return scale * tf.nn.softmax_cross_entropy_with_logits(targets, student)


def hard_loss(student_logits, label_ids, kind):
    """The per-example loss against the true labels, float32 [B] (the classifier's own loss)."""
    student = tf.cast(student_logits, tf.float32)
    if kind == "regression":
        return tf.square(student[:, 0] - tf.cast(tf.reshape(label_ids, [-1]), tf.float32))
    if kind == "multi_label":
        labels = tf.cast(label_ids, tf.float32)
        return tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels, student), axis=-1)
    labels = tf.cast(tf.reshape(label_ids, [-1]), tf.int32)
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels, student)


def distillation_loss(
    student_logits, teacher_logits, label_ids, hard_weights, num_examples, *, kind, temperature,
    hard_label_weight,
):  # fmt: skip
    """sum over the batch of (soft + hard_label_weight * hard_weight * hard) / num_examples.

    Args:
      student_logits, teacher_logits: float [B, L].
      label_ids: the batch's labels: int [B], float [B, L] of 0 and 1 (multi_label) or float [B].
      hard_weights: float [B]: 1 for a labelled text, 0 for a transfer text (its label_ids unused).
      num_examples: the global batch's examples (the loop's normalizer).
      kind, temperature: as soft_loss's.
      hard_label_weight: the weight of the labels' loss beside the teacher's.

    Returns:
      float32 scalar: this replica's part of the global batch's loss.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    per_example = soft_loss(student_logits, teacher_logits, kind, temperature)
    if hard_label_weight:
        weights = hard_label_weight * tf.cast(tf.reshape(hard_weights, [-1]), tf.float32)
        per_example += weights * hard_loss(student_logits, label_ids, kind)
    return tf.reduce_sum(per_example) / num_examples
