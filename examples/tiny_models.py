"""Tiny randomly initialised Qwen-VL models for the examples and the tests: Qwen2-VL, Qwen2.5-VL,
Qwen3-VL and Qwen3.5 (its Gated DeltaNet and full-attention layers, one of each), each built from its transformers config at width 64 with two text and two vision layers
(seconds a step on a CPU), with the real vocabulary, rotary layout and vision tower of the family;
and the Omni models' thinkers ("qwen2.5-omni"; "qwen3-omni", its text layers mixtures of four
experts), each with a two-layer audio encoder (not in FAMILIES, the image-and-text families).

    model = tiny_model("qwen2-vl")                  # the same weights for the same seed
    model = tiny_model("qwen3-vl", attn="eager")

The example scripts' shared arguments: add_model_arguments(parser) (the manifest, --tokenizer,
--family, and --tiny FAMILY or --model-path DIR), and model_from(args), the model they name.
"""

from __future__ import annotations

import torch

FAMILIES = ("qwen2-vl", "qwen2.5-vl", "qwen3-vl", "qwen3.5")
VOCAB = 151_936  # the Qwen2/3 embedding size (the tokenizer's 151,669 ids, rounded up)
VOCAB_3_5 = 248_320  # Qwen3.5's (its tokenizer's 248,077 ids, rounded up)


def _text(**extra) -> dict:
    # head_dim 16: mrope splits its 8 frequencies into 2 temporal, 3 height, 3 width.
    return dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=32_768,
        rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3]},
        **extra,
    )


def _vision(patch_size: int, **extra) -> dict:
    """The shrunk vision tower of Qwen2.5-VL and later (two layers, width 32 out to 64)."""
    return dict(
        depth=2, hidden_size=32, out_hidden_size=64, intermediate_size=64, num_heads=2, patch_size=patch_size, **extra
    )


def tiny_config(family: str, attn: str = "sdpa"):
    """The family's transformers config, shrunk; `attn`: sdpa or eager."""
    import transformers as tf

    if family == "qwen2-vl":
        config = tf.Qwen2VLConfig(
            text_config=_text(),
            vision_config=dict(depth=2, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2, patch_size=14),
        )
    elif family == "qwen2.5-vl":
        config = tf.Qwen2_5_VLConfig(
            text_config=_text(),
            vision_config=_vision(14, window_size=112, fullatt_block_indexes=[1], tokens_per_second=2),
        )
    elif family == "qwen3-vl":
        rope = {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [2, 3, 3], "mrope_interleaved": True}
        config = tf.Qwen3VLConfig(
            text_config={**_text(), "rope_parameters": rope},
            vision_config=_vision(16, num_position_embeddings=256, deepstack_visual_indexes=[0]),
        )
    elif family == "qwen3.5":
        # partial rotary (a quarter of head_dim 32: 4 frequencies, interleaved 2/1/1 as t/h/w)
        rope = {
            "rope_type": "default",
            "rope_theta": 1e7,
            "mrope_section": [2, 1, 1],
            "mrope_interleaved": True,
            "partial_rotary_factor": 0.25,
        }
        text = {**_text(), "vocab_size": VOCAB_3_5, "head_dim": 32, "rope_parameters": rope}
        text.update(
            layer_types=["linear_attention", "full_attention"],
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=16,
            linear_value_head_dim=16,
            linear_conv_kernel_dim=4,
        )
        config = tf.Qwen3_5Config(
            text_config=text,
            vision_config=_vision(16, num_position_embeddings=256),
        )
    elif family == "qwen2.5-omni":  # the thinker: Qwen2.5-VL's vision tower and an audio encoder
        config = tf.Qwen2_5OmniThinkerConfig(
            text_config=_text(),
            vision_config=_vision(14, window_size=112, fullatt_block_indexes=[1]),
            audio_config=dict(
                d_model=64, encoder_layers=2, encoder_attention_heads=2, encoder_ffn_dim=128, output_dim=64
            ),
        )
        # The checkpoint's config.json carries it; transformers 5.24's class does not declare it,
        # and its get_rope_index reads it when a batch comes without positions.
        config.vision_start_token_id = 151652
        config.audio_config._attn_implementation = attn
    elif family == "qwen3-omni":  # the thinker: Qwen3-VL's vision tower, a Qwen3 MoE text model
        rope = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [2, 3, 3], "mrope_interleaved": True}
        experts = dict(moe_intermediate_size=32, num_experts=4, num_experts_per_tok=2)
        config = tf.Qwen3OmniMoeThinkerConfig(
            text_config={**_text(), "rope_parameters": rope, **experts},
            vision_config=_vision(16, num_position_embeddings=256, deepstack_visual_indexes=[0]),
            audio_config=dict(
                d_model=64,
                encoder_layers=2,
                encoder_attention_heads=2,
                encoder_ffn_dim=128,
                output_dim=64,
                downsample_hidden_size=32,
            ),
            # the checkpoint's config.json: its token ids and 13 positions a second
            position_id_per_seconds=13,
            audio_token_id=151675,
            audio_start_token_id=151669,
            image_token_id=151655,
            video_token_id=151656,
        )
        config.vision_start_token_id = 151652
        config.audio_config._attn_implementation = attn
    else:
        raise ValueError(f"unknown family {family!r}")
    config._attn_implementation = attn
    config.text_config._attn_implementation = attn
    config.vision_config._attn_implementation = attn
    return config


def tiny_model(family: str, attn: str = "sdpa", seed: int = 0):
    """A randomly initialised model of `family` (the same weights for the same seed), float32, eval mode."""
    import transformers as tf

    classes = {
        "qwen2-vl": tf.Qwen2VLForConditionalGeneration,
        "qwen2.5-vl": tf.Qwen2_5_VLForConditionalGeneration,
        "qwen3-vl": tf.Qwen3VLForConditionalGeneration,
        "qwen3.5": tf.Qwen3_5ForConditionalGeneration,
        "qwen2.5-omni": tf.Qwen2_5OmniThinkerForConditionalGeneration,
        "qwen3-omni": tf.Qwen3OmniMoeThinkerForConditionalGeneration,
    }
    torch.manual_seed(seed)
    model = classes[family](tiny_config(family, attn))
    return model.eval()


def add_model_arguments(parser, root) -> None:
    """The manifest, --tokenizer (default: the repository's test tokenizer under `root`), --family,
    and the model: --tiny FAMILY (random, width 64) or --model-path DIR (a local checkpoint)."""
    parser.add_argument("manifest")
    parser.add_argument("--tokenizer", default=str(root / "tests/data/qwen3-tokenizer/tokenizer.json"))
    parser.add_argument("--family", default=None, help="qwen2-vl, qwen2.5-vl, qwen3-vl or qwen3.5 (default: --tiny's)")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--tiny", choices=FAMILIES)
    group.add_argument("--model-path")


def model_from(args):
    """The model the arguments name, in training mode: tiny_model(--tiny), or --model-path's
    checkpoint in bfloat16."""
    if args.tiny:
        return tiny_model(args.tiny).train()
    import transformers

    return transformers.AutoModelForImageTextToText.from_pretrained(args.model_path, dtype=torch.bfloat16).train()
