"""The Omni models' tokenizers, transformers' Qwen2.5-Omni processor built offline, and a
plain-Python reference of the processors' text and the models' positions (shared by the text,
audio and trainer tests and bench/audio.py).

Tokenizers: derived at test time from tests/data/qwen3-tokenizer/tokenizer.json
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
import re
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import torch

DATA = Path(__file__).resolve().parents[1] / "data"
TEMPLATE_DIR = Path(__file__).resolve().parents[2] / "src" / "text" / "templates"

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


TEMPLATES = {"qwen2.5-omni": "qwen2_5_omni.jinja", "qwen3-omni-thinking": "qwen3_omni_thinking.jinja"}


def omni_model(template: str) -> SimpleNamespace:
    """The template's tokenizer as `tokenizers` (with the template) and mmfeed load it, and its ids."""
    from tokenizers import Tokenizer as HfTokenizer
    from transformers import PreTrainedTokenizerFast

    import mmfeed

    spec = omni_tokenizer_json(template)
    hf = PreTrainedTokenizerFast(
        tokenizer_object=HfTokenizer.from_str(spec),
        chat_template=(TEMPLATE_DIR / TEMPLATES[template]).read_text(),
    )
    return SimpleNamespace(
        template=template, hf=hf, tok=mmfeed.Tokenizer.from_str(spec), ids=TOKEN_IDS[template], json=spec
    )


def omni_processor(omni: SimpleNamespace, max_pixels: int):
    """transformers' processor of the Omni model (Qwen2_5OmniProcessor, Qwen3OmniMoeProcessor): the
    PIL image processor with the checkpoint's settings, the checkpoints' WhisperFeatureExtractor
    settings, the derived tokenizer and the template."""
    import transformers as tf
    from tokenizers import Tokenizer
    from transformers.processing_utils import ProcessorMixin

    names = ("image", "audio", "video", "vision_bos", "vision_eos", "audio_bos", "audio_eos")
    if omni.template == "qwen2.5-omni":
        tokens = (
            "<|IMAGE|>",
            "<|AUDIO|>",
            "<|VIDEO|>",
            "<|vision_bos|>",
            "<|vision_eos|>",
            "<|audio_bos|>",
            "<|audio_eos|>",
        )
        images = tf.Qwen2VLImageProcessorPil(size={"shortest_edge": 56 * 56, "longest_edge": max_pixels})
        processor_class = tf.Qwen2_5OmniProcessor
    else:
        tokens = (
            "<|image_pad|>",
            "<|audio_pad|>",
            "<|video_pad|>",
            "<|vision_start|>",
            "<|vision_end|>",
            "<|audio_start|>",
            "<|audio_end|>",
        )
        images = tf.Qwen2VLImageProcessorPil(
            size={"shortest_edge": 56 * 56, "longest_edge": max_pixels},
            patch_size=16,
            image_mean=[0.5, 0.5, 0.5],
            image_std=[0.5, 0.5, 0.5],
        )
        processor_class = tf.Qwen3OmniMoeProcessor
    tok = tf.Qwen2TokenizerFast(
        tokenizer_object=Tokenizer.from_str(omni.json),
        pad_token="<|endoftext|>",
        padding_side="right",
        extra_special_tokens={f"{n}_token": t for n, t in zip(names, tokens)},
    )
    extractor = tf.WhisperFeatureExtractor(
        feature_size=128, sampling_rate=16000, hop_length=160, n_fft=400, chunk_length=300, return_attention_mask=True
    )
    # The class check wants the torchvision video processor, absent here; no video is given.
    with mock.patch.object(ProcessorMixin, "check_argument_for_proper_class", lambda self, name, arg: None):
        return processor_class(
            image_processor=images,
            video_processor=None,
            feature_extractor=extractor,
            tokenizer=tok,
            chat_template=omni.hf.chat_template,
        )


def reference(omni, msgs, tools, sizes):
    """The processor's expansion and Qwen's labels, in plain Python: tokenize the rendering, repeat
    each pad by the next size of its kind (or, a list, by those ids: a video with its soundtrack),
    train each assistant turn with <|im_end|>\\n."""
    text = omni.hf.apply_chat_template(msgs, tools=tools, tokenize=False)
    enc = omni.hf(text, add_special_tokens=False, return_offsets_mapping=True)
    spans = []
    for head in re.finditer(re.escape("<|im_start|>assistant\n"), text):
        end = text.index("<|im_end|>", head.end())
        spans.append((head.end(), end + len("<|im_end|>\n")))
    pads = {omni.ids[k]: k for k in ("image", "video", "audio")}
    bounds = {omni.ids[k] for k in ("vision_start", "vision_end", "audio_start", "audio_end")}
    next_size = {k: iter(v) for k, v in sizes.items()}
    ids, labels = [], []
    for token, (s, _) in zip(enc["input_ids"], enc["offset_mapping"]):
        if token in pads:
            n = next(next_size[pads[token]])
            run = n if isinstance(n, list) else [token] * n
            ids += run
            labels += [-100] * len(run)
            continue
        ids.append(token)
        labels.append(token if token not in bounds and any(a <= s < b for a, b in spans) else -100)
    return text, ids, labels


def soundtrack_ids(omni, grid, second_per_grid, audio_tokens):
    """The processor's text for a video with its soundtrack, through its own method, tokenized."""
    if omni.template == "qwen2.5-omni":
        from transformers.models.qwen2_5_omni.processing_qwen2_5_omni import Qwen2_5OmniProcessor as Processor

        bos, eos, video, audio, per_second = "<|audio_bos|>", "<|audio_eos|>", "<|VIDEO|>", "<|AUDIO|>", 25
    else:
        from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import Qwen3OmniMoeProcessor as Processor

        bos, eos, video, audio, per_second = "<|audio_start|>", "<|audio_end|>", "<|video_pad|>", "<|audio_pad|>", 13
    processor = SimpleNamespace(
        audio_bos_token=bos,
        audio_eos_token=eos,
        video_token=video,
        audio_token=audio,
        video_processor=SimpleNamespace(merge_size=2),
    )
    processor.get_chunked_index = lambda *a: Processor.get_chunked_index(processor, *a)
    text = Processor.replace_video_with_audio_token(
        processor,
        {"video_grid_thw": [torch.tensor(grid)], "video_second_per_grid": [second_per_grid]},
        0,
        {"num_audio_tokens": [audio_tokens]},
        0,
        position_id_per_seconds=per_second,
        seconds_per_chunk=2.0,
    )
    return omni.hf(text, add_special_tokens=False)["input_ids"]


def audio_tokens_of(template, frames):
    """The processor's count of audio tokens for a clip of `frames` valid feature frames."""
    if template == "qwen2.5-omni":
        from transformers.models.qwen2_5_omni.processing_qwen2_5_omni import _get_feat_extract_output_lengths

        return int(_get_feat_extract_output_lengths(torch.tensor(frames)))
    from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import _get_feat_extract_output_lengths

    return int(_get_feat_extract_output_lengths(torch.tensor(frames)))


def media_kinds(msgs):
    """The conversation's media items in order, as mmfeed's parser and qwen-omni-utils name them."""
    kinds = []
    for m in msgs:
        for item in m.get("content") if isinstance(m.get("content"), list) else []:
            if "image" in item or "image_url" in item:
                kinds.append("image")
            elif "video" in item:
                kinds.append("video")
            elif "audio" in item or "audio_url" in item:
                kinds.append("audio")
    return kinds


def rope_index(omni, ids, images, videos, second_per_grids, frames, use_audio_in_video=False):
    """The model's get_rope_index on one sample, through an object carrying only what it reads."""
    config = SimpleNamespace(
        image_token_id=omni.ids["image"],
        video_token_id=omni.ids["video"],
        audio_token_id=omni.ids["audio"],
        vision_start_token_id=omni.ids["vision_start"],
        audio_start_token_id=omni.ids["audio_start"],
        seconds_per_chunk=2.0,
        audio_config=SimpleNamespace(n_window=50),
    )
    if omni.template == "qwen2.5-omni":
        from transformers.models.qwen2_5_omni.modeling_qwen2_5_omni import (
            Qwen2_5OmniPreTrainedModelForConditionalGeneration as Model,
        )

        config.position_id_per_seconds = 25
    else:
        from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import (
            Qwen3OmniMoePreTrainedModelForConditionalGeneration as Model,
        )

        config.position_id_per_seconds = 13
    fake = SimpleNamespace(config=config, spatial_merge_size=2)
    fake.get_llm_pos_ids_for_vision = lambda *a: Model.get_llm_pos_ids_for_vision(fake, *a)
    fake.get_chunked_index = lambda *a: Model.get_chunked_index(fake, *a)
    input_ids = torch.tensor(ids)[None]
    want, _ = Model.get_rope_index(
        fake,
        input_ids,
        image_grid_thw=torch.tensor(images) if images else None,
        video_grid_thw=torch.tensor(videos) if videos else None,
        attention_mask=torch.ones_like(input_ids),
        audio_seqlens=torch.tensor(frames) if frames else None,
        second_per_grids=torch.tensor(second_per_grids) if videos else None,
        use_audio_in_video=use_audio_in_video,
    )
    return want[:, 0].numpy()
