"""Dynamic masking (RoBERTa's): records written without masks, masked afresh on every pass as they are read.

`create_pretraining_data.py --dynamic_masking=True` writes each instance unmasked, with what masking
needs to know of the vocabulary, so that `run_pretraining.py --dynamic_masking=True` masks it in the
input pipeline (masking.py) by the original's rules without the vocab file:

- "input_ids", "input_mask", "segment_ids" [S] and "next_sentence_labels" [1], as in masked records;
- "word_ids" [S]: 0 at [CLS], [SEP] and padding (never masked); elsewhere the number (from 1) of the
  word a token belongs to, a "##" piece sharing the number of the token right before it (whole-word
  masking masks a word's tokens together);
- "mask_token_id" [1]: the id of [MASK]; "vocab_size" [1]: random replacements are drawn from
  [0, vocab_size), the vocab file's ids, as the original draws them.

No masked_lm_* features: reading such records as masked ones (or masked ones as these) fails at once,
with one line (reader.check_records). No TensorFlow here: the data writer imports this module. The
--dynamic_masking flag of both scripts is bert_tf/shared_settings.py's.
"""

FEATURE_NAMES = (
    "input_ids",
    "input_mask",
    "segment_ids",
    "word_ids",
    "next_sentence_labels",
    "mask_token_id",
    "vocab_size",
)


def word_ids(input_ids, special_ids, subword_ids):
    """[L] word numbers of one instance's ids: 0 for special ids, a "##" id joins the word before it.

    As instances._whole_words groups them: a "##" piece joins the previous word only when it directly
    follows a non-special token.
    """
    numbers = []
    word = 0
    previous_special = True
    for token_id in input_ids:
        if token_id in special_ids:
            numbers.append(0)
            previous_special = True
            continue
        if previous_special or token_id not in subword_ids:
            word += 1
        numbers.append(word)
        previous_special = False
    return numbers
