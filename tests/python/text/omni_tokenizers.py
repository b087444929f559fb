"""The Omni models' tokenizers, derived at test time from tests/data/qwen3-tokenizer/tokenizer.json
(no package ships the checkpoints' own files; see tests/data/README.md). Both keep the Qwen2.5 /
Qwen3 byte-level BPE vocabulary and merges; only special tokens differ:

- Qwen2.5-Omni renames seven added tokens to the names its config and processor use
  (configuration_qwen2_5_omni.py: audio_token_index 151646, audio_start_token_id 151647,
  audio_end_token_id 151648, vision_start_token_id 151652, vision_end_token_id 151653,
  image_token_index 151655, video_token_index 151656) — the same file as
  ../shared/data/qwen2.5-omni-tokenizer/tokenizer.json.
- Qwen3-Omni keeps Qwen3's vision tokens and adds seven after them, as the checkpoint's
  tokenizer does (Qwen3-Omni-30B-A3B: audio_start_token_id 151669, audio_end_token_id 151670 and
  audio_token_id 151675 in its config.json; its talker's four <tts_...> tokens between them).
  The ids run on without a gap: `tokenizers` numbers added tokens absent from the vocabulary in
  order, whatever id the file gives them.
"""

from __future__ import annotations

import json
from pathlib import Path

DATA = Path(__file__).resolve().parents[2] / "data"

QWEN2_5_OMNI_RENAMED = {
    151646: "<|AUDIO|>",
    151647: "<|audio_bos|>",
    151648: "<|audio_eos|>",
    151652: "<|vision_bos|>",
    151653: "<|vision_eos|>",
    151655: "<|IMAGE|>",
    151656: "<|VIDEO|>",
}
QWEN3_OMNI_ADDED = {
    151669: "<|audio_start|>",
    151670: "<|audio_end|>",
    151671: "<tts_pad>",
    151672: "<tts_text_bos>",
    151673: "<tts_text_eod>",
    151674: "<tts_text_bos_single>",
    151675: "<|audio_pad|>",
}

# The ids get_rope_index and the label mask read, per template.
TOKEN_IDS = {
    "qwen2.5-omni": {
        "image": 151655,
        "video": 151656,
        "audio": 151646,
        "vision_start": 151652,
        "vision_end": 151653,
        "audio_start": 151647,
        "audio_end": 151648,
    },
    "qwen3-omni-thinking": {
        "image": 151655,
        "video": 151656,
        "audio": 151675,
        "vision_start": 151652,
        "vision_end": 151653,
        "audio_start": 151669,
        "audio_end": 151670,
    },
}


def omni_tokenizer_json(template: str) -> str:
    """The tokenizer.json text of the model whose chat template is `template`."""
    spec = json.loads((DATA / "qwen3-tokenizer" / "tokenizer.json").read_text())
    added = spec["added_tokens"]
    if template == "qwen2.5-omni":
        for token in added:
            token["content"] = QWEN2_5_OMNI_RENAMED.get(token["id"], token["content"])
    elif template == "qwen3-omni-thinking":
        like = next(t for t in added if t["content"] == "<|vision_start|>")
        added += [dict(like, id=i, content=c) for i, c in QWEN3_OMNI_ADDED.items()]
    else:
        raise ValueError(template)
    return json.dumps(spec, ensure_ascii=False)
