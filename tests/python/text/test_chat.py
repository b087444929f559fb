"""Chat templates and SFT encoding against transformers: rendering identical to
apply_chat_template with the real template text, ids identical to the tokenizer applied to the
rendering, labels identical to a plain Python implementation of Qwen's recipe written here,
mrope position ids identical to transformers' get_rope_index."""

import json
import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from chat_samples import SEED_CONVERSATIONS, generated, img, rand_json, rand_number, txt
from conftest import ROOT
from transformers import PreTrainedTokenizerFast

import mmfeed

DATA = ROOT / "tests" / "data"
TEMPLATES = ROOT / "src" / "text" / "templates"  # the published texts the engine embeds
IMAGE_PAD, VIDEO_PAD = 151655, 151656


@pytest.fixture(scope="module")
def hf():
    template = (TEMPLATES / "qwen2_vl.jinja").read_text()
    return PreTrainedTokenizerFast(
        tokenizer_file=str(DATA / "qwen3-tokenizer" / "tokenizer.json"), chat_template=template
    )


@pytest.fixture(scope="module")
def tok():
    return mmfeed.Tokenizer.from_file(DATA / "qwen3-tokenizer" / "tokenizer.json")


CONVERSATIONS = {
    "plain strings": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
    "system first": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [img("a"), txt("What?")]},
        {"role": "assistant", "content": [txt("A cat.")]},
    ],
    "several images": [
        {"role": "user", "content": [img("a"), img("b"), txt("Compare."), img("c")]},
        {"role": "assistant", "content": "They differ."},
    ],
    "video": [
        {"role": "user", "content": [{"type": "video", "video": "v.mp4"}, txt("Describe")]},
        {"role": "assistant", "content": "It moves."},
    ],
    "multi-turn": [
        {"role": "user", "content": [img("a"), txt("One?")]},
        {"role": "assistant", "content": "Yes."},
        {"role": "user", "content": [txt("Two?"), img("b")]},
        {"role": "assistant", "content": [txt("\n  Spaced\n\nreply  ")]},
    ],
    "empty text items": [
        {"role": "user", "content": [txt(""), img("a"), txt("")]},
        {"role": "assistant", "content": [txt("")]},
    ],
    "unicode": [
        {"role": "user", "content": "中文？ e\u0301 👨‍👩‍👧"},
        {"role": "assistant", "content": "العربية 😀\r\n"},
    ],
}


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_rendering_identical_to_apply_chat_template(hf, name):
    msgs = CONVERSATIONS[name]
    for gen in (False, True):
        for vid in (False, True):
            want = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen, add_vision_id=vid)
            assert mmfeed.render_chat(msgs, add_generation_prompt=gen, add_vision_id=vid) == want


def test_llava_and_sharegpt_samples_render_as_their_messages(hf):
    llava = {
        "id": "l1",
        "image": ["a.jpg", "b.jpg"],
        "conversations": [
            {"from": "human", "value": "<image>\nCompare <image> please"},
            {"from": "gpt", "value": "Same."},
        ],
    }
    messages = [
        {"role": "user", "content": [img("a.jpg"), txt("\nCompare "), img("b.jpg"), txt(" please")]},
        {"role": "assistant", "content": [txt("Same.")]},
    ]
    assert mmfeed.render_chat(llava) == hf.apply_chat_template(messages, tokenize=False)
    sharegpt = {
        "images": ["x.png"],
        "conversations": [
            {"from": "system", "value": "Sys"},
            {"from": "user", "value": "<image>Hi"},
            {"from": "assistant", "value": "Yo"},
        ],
    }
    messages = [
        {"role": "system", "content": "Sys"},
        {"role": "user", "content": [img("x.png"), txt("Hi")]},
        {"role": "assistant", "content": "Yo"},
    ]
    assert mmfeed.render_chat(sharegpt) == hf.apply_chat_template(messages, tokenize=False)


def test_the_processor_form_renders_without_media(hf):
    # Issue 49: {"type": "image"} items with no source, as apply_chat_template and TRL's examples
    # render them; a conversation's text needs no media (the Loader still requires a source).
    messages = [
        {
            "role": "user",
            "content": [{"type": "image"}, {"type": "video"}, {"type": "image"}, {"type": "text", "text": "Compare."}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "The same scene."}]},
    ]
    for vid in (False, True):
        want = hf.apply_chat_template(messages, tokenize=False, add_vision_id=vid)
        assert mmfeed.render_chat(messages, add_vision_id=vid) == want


def test_the_processor_form_encodes_as_the_sourced_form(tok):
    messages = [
        {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]},
        {"role": "assistant", "content": "A cat."},
    ]
    sourced = json.loads(json.dumps(messages))
    sourced[0]["content"][0]["image"] = "a.jpg"
    bare = mmfeed.encode_conversation(messages, [(1, 4, 4)], tok)
    assert bare["input_ids"].tolist() == mmfeed.encode_conversation(sourced, [(1, 4, 4)], tok)["input_ids"].tolist()
    assert bare["labels"].tolist() == mmfeed.encode_conversation(sourced, [(1, 4, 4)], tok)["labels"].tolist()


def reference_encoding(hf, msgs, grids, merge=2, newline=True):
    """Qwen's recipe in plain Python: tokenize the rendering, expand image pads, train each
    assistant reply and its <|im_end|> (and the newline after it)."""
    text = hf.apply_chat_template(msgs, tokenize=False)
    enc = hf(text, add_special_tokens=False, return_offsets_mapping=True)
    spans, cursor = [], 0
    for m in msgs:
        head = f"<|im_start|>{m['role']}\n"
        start = text.index(head, cursor) + len(head)
        end = text.index("<|im_end|>\n", start)
        if m["role"] == "assistant":
            spans.append((start, end + len("<|im_end|>") + (1 if newline else 0)))
        cursor = end
    ids, labels, grid_iter = [], [], iter(grids)
    for token, (s, _) in zip(enc["input_ids"], enc["offset_mapping"]):
        if token in (IMAGE_PAD, VIDEO_PAD):
            t, h, w = next(grid_iter)
            n = t * h * w // merge**2
            ids += [token] * n
            labels += [-100] * n
            continue
        ids.append(token)
        vision = token in (151652, 151653)
        labels.append(token if not vision and any(a <= s < b for a, b in spans) else -100)
    return ids, labels


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_ids_and_labels_identical_to_the_reference(hf, tok, name):
    msgs = CONVERSATIONS[name]
    n_images = sum(1 for m in msgs if isinstance(m["content"], list) for c in m["content"] if c["type"] == "image")
    n_videos = sum(1 for m in msgs if isinstance(m["content"], list) for c in m["content"] if c["type"] == "video")
    grids = [(1, 4 + 2 * i, 6) for i in range(n_images)]
    vgrids = [(2, 4, 4)] * n_videos
    for policy, newline in (("qwen", True), ("content_and_eos", False)):
        out = mmfeed.encode_conversation(msgs, grids, tok, video_grids=vgrids, labels=policy)
        # the reference expands images then videos in order of appearance
        order = []
        for m in msgs:
            if isinstance(m["content"], list):
                for c in m["content"]:
                    if c["type"] in ("image", "video"):
                        order.append(c["type"])
        it_img, it_vid = iter(grids), iter(vgrids)
        all_grids = [next(it_img) if kind == "image" else next(it_vid) for kind in order]
        ids, labels = reference_encoding(hf, msgs, all_grids, newline=newline)
        assert out["input_ids"].tolist() == ids
        assert out["labels"].tolist() == labels
        assert out["attention_mask"].tolist() == [1] * len(ids)


def test_mrope_positions_identical_to_transformers(tok):
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    msgs = CONVERSATIONS["multi-turn"]
    grids = [(1, 8, 12), (1, 6, 4)]
    out = mmfeed.encode_conversation(msgs, grids, tok, mrope=True)
    ids = torch.tensor(out["input_ids"])[None]
    token_type = ((ids == IMAGE_PAD) * 1 + (ids == VIDEO_PAD) * 2).int()
    fake = SimpleNamespace(config=SimpleNamespace(vision_config=SimpleNamespace(spatial_merge_size=2)))
    fake.get_vision_position_ids = lambda *a, **k: Qwen2VLModel.get_vision_position_ids(fake, *a, **k)
    want, _ = Qwen2VLModel.get_rope_index(fake, ids, token_type, image_grid_thw=torch.tensor(grids))
    np.testing.assert_array_equal(out["position_ids"], want[:, 0].numpy())


VIDEO_CHAT = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What happens?"},
            {"type": "video", "video": "a.mp4"},
            {"type": "image", "image": "b.jpg"},
            {"type": "video", "video": "c.mp4"},
        ],
    },
    {"role": "assistant", "content": "A ball rolls."},
]


def rope_fake(model_class, **vision):
    fake = SimpleNamespace(config=SimpleNamespace(vision_config=SimpleNamespace(spatial_merge_size=2, **vision)))
    fake.get_vision_position_ids = lambda *a, **k: model_class.get_vision_position_ids(fake, *a, **k)
    return fake


def test_video_mrope_positions_for_qwen3_vl_are_transformers(tok):
    """Qwen3-VL: each temporal group is its own block after its timestamp text."""
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

    vgrids, images = [(3, 4, 6), (2, 8, 4)], [(1, 6, 4)]
    stamps = [[0.25, 1.5, 2.75], [0.5, 10.05]]
    for template in ("qwen3-vl", "qwen3-vl-thinking"):
        out = mmfeed.encode_conversation(
            VIDEO_CHAT, images, tok, video_grids=vgrids, video_timestamps=stamps, template=template, mrope=True
        )
        ids = torch.tensor(out["input_ids"])[None]
        token_type = ((ids == IMAGE_PAD) * 1 + (ids == VIDEO_PAD) * 2).int()
        want, _ = Qwen3VLModel.get_rope_index(
            rope_fake(Qwen3VLModel),
            ids,
            token_type,
            image_grid_thw=torch.tensor(images),
            video_grid_thw=torch.tensor(vgrids),
        )
        np.testing.assert_array_equal(out["position_ids"], want[:, 0].numpy())
        text = tok.decode(out["input_ids"].tolist())
        assert "<|vision_start|><0.2 seconds><|vision_start|><|video_pad|>" in text
        assert "<|vision_end|><10.1 seconds><|vision_start|>" in text  # 10.05 is 10.050000000000000711


@pytest.mark.parametrize("second_per_grid_t", [1.0, 0.7, 1 / 3])
def test_video_mrope_positions_for_qwen2_5_vl_are_transformers(tok, second_per_grid_t):
    """Qwen2.5-VL: a video's groups step by second_per_grid_t x tokens_per_second (2). Grids
    whose temporal positions stay below max(h, w) / merge, where transformers 5.24's next-text
    position (block start + max(h, w) / merge) and the spec's (the block's largest + 1) agree."""
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VLModel

    vgrids, images = [(3, 8, 12), (2, 8, 8)], [(1, 6, 4)]
    out = mmfeed.encode_conversation(
        VIDEO_CHAT,
        images,
        tok,
        video_grids=vgrids,
        second_per_grid_ts=[second_per_grid_t] * 2,
        template="qwen2.5-vl",
        mrope=True,
    )
    ids = torch.tensor(out["input_ids"])[None]
    token_type = ((ids == IMAGE_PAD) * 1 + (ids == VIDEO_PAD) * 2).int()
    want, _ = Qwen2_5_VLModel.get_rope_index(
        rope_fake(Qwen2_5_VLModel, tokens_per_second=2),
        ids,
        token_type,
        image_grid_thw=torch.tensor(images),
        video_grid_thw=torch.tensor(vgrids),
        second_per_grid_ts=torch.tensor([second_per_grid_t] * 2),
    )
    np.testing.assert_array_equal(out["position_ids"], want[:, 0].numpy())


def test_video_mrope_continues_after_the_largest_position(tok):
    """A video whose temporal positions pass max(h, w) / merge: the text after it continues at
    the block's largest position + 1 (the spec, transformers 4.x), where 5.24 would reuse
    positions the block holds."""
    out = mmfeed.encode_conversation(
        [VIDEO_CHAT[0]],
        [(1, 2, 2)],
        tok,
        video_grids=[(6, 2, 2), (1, 2, 2)],
        second_per_grid_ts=[2.0, 2.0],
        template="qwen2.5-vl",
        mrope=True,
    )
    ids, pos = out["input_ids"], out["position_ids"]
    first = list(ids).index(VIDEO_PAD)
    start = pos[0, first]
    assert pos[0, first : first + 6].tolist() == [start + 4 * t for t in range(6)]  # int(t * 2.0 * 2)
    assert pos[:, first + 6].tolist() == [start + 21] * 3  # <|vision_end|>: 20 + 1


def test_truncation_never_cuts_a_timestamped_video(tok):
    """Qwen3-VL: a cut anywhere in a video's groups (its timestamps included) moves before the
    video's outer <|vision_start|>; a video that fits whole is kept."""
    kwargs = dict(
        video_grids=[(2, 2, 2), (3, 2, 2)],
        video_timestamps=[[0.5, 1.5], [0.5, 1.5, 2.5]],
        template="qwen3-vl",
        truncation="truncate",
    )
    full = mmfeed.encode_conversation(VIDEO_CHAT, [(1, 2, 2)], tok, **kwargs)["input_ids"].tolist()
    starts = [i for i, t in enumerate(full) if t == 151652]
    # starts: video 1 outer + 2 groups, the image, video 2 outer + 3 groups
    second_video = starts[4]
    for cut in range(second_video + 1, starts[-1] + 4):
        out = mmfeed.encode_conversation(VIDEO_CHAT, [(1, 2, 2)], tok, max_length=cut, **kwargs)
        assert out["input_ids"].tolist() == full[:second_video], cut
        assert (out["images_kept"], out["videos_kept"]) == (1, 1)
    first_video_end = starts[3] - 1  # the outer <|vision_end|> just before the image's block
    out = mmfeed.encode_conversation(VIDEO_CHAT, [(1, 2, 2)], tok, max_length=first_video_end + 1, **kwargs)
    assert out["input_ids"].tolist() == full[: first_video_end + 1] and out["videos_kept"] == 1


def test_truncation_policies(tok):
    msgs = CONVERSATIONS["multi-turn"]
    grids = [(1, 8, 8), (1, 8, 8)]
    full = mmfeed.encode_conversation(msgs, grids, tok)
    n = len(full["input_ids"])
    with pytest.raises(ValueError, match=f"conversation has {n} tokens, more than max_length {n - 1}"):
        mmfeed.encode_conversation(msgs, grids, tok, max_length=n - 1)
    # A cut inside the second image's block moves before its <|vision_start|>.
    ids = full["input_ids"].tolist()
    second_start = [i for i, t in enumerate(ids) if t == 151652][1]
    cut = mmfeed.encode_conversation(msgs, grids, tok, max_length=second_start + 5, truncation="truncate")
    assert cut["input_ids"].tolist() == ids[:second_start]
    assert cut["images_kept"] == 1
    assert mmfeed.encode_conversation(msgs, grids, tok, max_length=n)["input_ids"].tolist() == ids


@pytest.mark.parametrize(
    "sample,message",
    [
        (
            {"messages": [{"content": "x"}]},
            'messages[0] has no "role" (expected "system", "user", "assistant" or "tool")',
        ),
        (
            {"messages": [{"role": "user"}]},
            'messages[0] has no "content" (expected a string or a list of content items)',
        ),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0] has unknown role 'wizard'"),
        (
            {"id": "s7", "messages": [{"role": "user", "content": [{"type": "sound"}]}]},
            'sample s7: messages[0].content[0] has no "text", "image", "video" or "audio" (type \'sound\')',
        ),
        ({"id": "s8", "messages": {}}, "sample s8: messages must be a list of messages, got an object"),
        (
            {
                "messages": [
                    {"role": "user", "content": "q"},
                    {"role": "user", "content": [{"type": "text", "text": 5}]},
                ]
            },
            "messages[1].content[0].text must be a string, got a number",
        ),
        (
            {"conversations": [{"from": "human", "value": "<image> <image>"}], "image": "a.jpg"},
            "more <image> placeholders than images listed",
        ),
        (
            {"conversations": [{"from": "human", "value": "hi"}], "images": ["a.jpg"]},
            "1 images listed but 0 <image> placeholders",
        ),
        ({"conversations": [{"from": "alien", "value": "hi"}]}, "unknown speaker 'alien'"),
        ({"prompt": "x"}, 'neither "messages" nor "conversations"'),
    ],
)
def test_bad_conversations_are_named_errors(tok, sample, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        mmfeed.encode_conversation(sample, [], tok)


def test_image_count_must_match_the_grids(tok):
    msgs = CONVERSATIONS["several images"]
    with pytest.raises(ValueError, match="conversation has 3 images but 2 image grids were given"):
        mmfeed.encode_conversation(msgs, [(1, 4, 4)] * 2, tok)


def test_a_reply_that_nfc_changes_is_trained_like_its_composed_form(tok):
    # NFC composes these: the ids equal those of the composed text, and so must the labels (the
    # first token of the reply was left untrained when the change began right after the header).
    for decomposed, composed in [
        ("\u1100\u1161\u11a8 yes", "\uac01 yes"),
        ("\u304b\u3099 x", "\u304c x"),
        ("\u212b x", "\u00c5 x"),
    ]:
        out = [
            mmfeed.encode_conversation(
                [{"role": "user", "content": "q"}, {"role": "assistant", "content": reply}], [], tok
            )
            for reply in (decomposed, composed)
        ]
        assert list(out[0]["input_ids"]) == list(out[1]["input_ids"]), decomposed
        assert list(out[0]["labels"]) == list(out[1]["labels"]), decomposed


def test_grids_the_merger_cannot_cut_are_refused(tok):
    # They crashed the process (an mrope index past the end, a division by zero) or looped.
    msgs = CONVERSATIONS["several images"]
    for grids, options, message in [
        ([(1, 5, 5)] * 3, dict(mrope=True), r"grid \(1, 5, 5\) is not positive"),
        ([(1, 4, 4), (1, 4, 4), (0, 4, 4)], {}, r"grid \(0, 4, 4\)"),
        ([(1, 4, 4)] * 3, dict(merge_size=0), "merge_size 0 is not positive"),
        ([(1, 4, 4)] * 3, dict(merge_size=-2, mrope=True), "merge_size -2"),
    ]:
        with pytest.raises(ValueError, match=message):
            mmfeed.encode_conversation(msgs, grids, tok, **options)


# --- Qwen3-VL (Instruct and Thinking) -----------------------------------------------------------

QWEN3 = {"qwen3-vl": "qwen3_vl.jinja", "qwen3-vl-thinking": "qwen3_vl_thinking.jinja"}


def qwen3_template(name):
    return (TEMPLATES / QWEN3[name]).read_text()


@pytest.mark.parametrize("template", sorted(QWEN3))
def test_qwen3_rendering_identical_to_apply_chat_template(hf, template):
    text = qwen3_template(template)
    for i, (msgs, tools) in enumerate(generated(SEED_CONVERSATIONS)):
        for gen in (False, True):
            for vid in (False, True):
                want = hf.apply_chat_template(
                    msgs, tools=tools, chat_template=text, tokenize=False, add_generation_prompt=gen, add_vision_id=vid
                )
                got = mmfeed.render_chat(
                    msgs, template=template, add_generation_prompt=gen, add_vision_id=vid, tools=tools
                )
                assert got == want, (i, gen, vid, msgs, tools)


def test_generated_conversations_reach_every_branch():
    convs = generated(SEED_CONVERSATIONS)
    seen = set()
    for msgs, tools in convs:
        roles = [m["role"] for m in msgs]
        seen |= {"system first"} if roles[0] == "system" else {"no system"}
        seen |= {"later system"} if "system" in roles[1:] else set()
        seen |= {"tools"} if tools else set()
        seen |= {"tool run"} if any(a == b == "tool" for a, b in zip(roles, roles[1:])) else set()
        for m in msgs:
            c = m.get("content")
            seen |= {"string content"} if isinstance(c, str) else {"list content"} if c is not None else {"no content"}
            if isinstance(c, list):
                seen |= {item.get("type") for item in c}
            if isinstance(c, str) and c.startswith("<tool_response>"):
                seen.add("user tool_response")
            if isinstance(c, str) and "</think>" in c and m["role"] == "assistant":
                seen.add("inline think")
            for key in ("reasoning_content", "thinking", "reasoning"):
                seen |= {key} if key in m else set()
            for call in m.get("tool_calls", []):
                seen.add("function wrapper" if "function" in call else "bare call")
                args = (call.get("function") or call)["arguments"]
                seen.add("string arguments" if isinstance(args, str) else "json arguments")
        seen |= {"ends with assistant"} if roles[-1] == "assistant" else set()
    assert seen >= {
        "system first",
        "no system",
        "later system",
        "tools",
        "tool run",
        "string content",
        "list content",
        "no content",
        "image",
        "image_url",
        "video",
        "text",
        "user tool_response",
        "inline think",
        "reasoning_content",
        "thinking",
        "reasoning",
        "function wrapper",
        "bare call",
        "string arguments",
        "json arguments",
        "ends with assistant",
    }, seen


def test_tool_schemas_serialise_as_json_dumps():
    # tojson under transformers is json.dumps(ensure_ascii=False): key order kept, floats as repr.
    import random

    rng = random.Random(7)
    for _ in range(500):
        value = rand_json(rng)
        tool = {"v": value, "n": rand_number(rng)}
        out = mmfeed.render_chat([{"role": "user", "content": "q"}], template="qwen3-vl", tools=[tool])
        assert "<tools>\n" + json.dumps(tool, ensure_ascii=False) + "\n</tools>" in out, tool


def test_tools_may_be_functions_as_transformers_takes_them(hf):
    def get_weather(city: str, days: int = 1):
        """Weather forecast.

        Args:
            city: The city.
            days: How many days.
        """

    msgs = [{"role": "user", "content": "Weather in Paris?"}]
    want = hf.apply_chat_template(msgs, tools=[get_weather], chat_template=qwen3_template("qwen3-vl"), tokenize=False)
    assert mmfeed.render_chat(msgs, template="qwen3-vl", tools=[get_weather]) == want


def qwen3_reference_labels(hf, text, template, grids, vgrids, newline=True, train_reasoning=True):
    """Labels computed here from the rendered text: each "<|im_start|>assistant\\n" turn up to
    its <|im_end|> (+ "\\n"), minus the leading <think> block when not trained; vision tokens
    and everything else -100."""
    spans, skip, at = [], [], 0
    while (at := text.find("<|im_start|>assistant\n", at)) != -1:
        start = at + len("<|im_start|>assistant\n")
        end = text.find("<|im_end|>", start)
        if end == -1:  # the generation prompt
            break
        spans.append((start, end + len("<|im_end|>") + (1 if newline else 0)))
        if template == "qwen3-vl-thinking" and text.startswith("<think>\n", start):
            skip.append((start, text.index("\n</think>\n\n", start) + len("\n</think>\n\n")))
        at = end
    if train_reasoning:
        skip = []
    enc = hf(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, labels, images, videos = [], [], iter(grids), iter(vgrids or [])
    for token, (s, _) in zip(enc["input_ids"], enc["offset_mapping"]):
        if token in (IMAGE_PAD, VIDEO_PAD):
            if token == VIDEO_PAD and vgrids is None:  # pads written out already
                ids.append(token)
                labels.append(-100)
                continue
            t, h, w = next(images) if token == IMAGE_PAD else next(videos)
            ids += [token] * (t * h * w // 4)
            labels += [-100] * (t * h * w // 4)
            continue
        ids.append(token)
        trained = any(a <= s < b for a, b in spans) and not any(a <= s < b for a, b in skip)
        labels.append(token if trained and token not in (151652, 151653) else -100)
    return ids, labels


# A video of grid (2, 2, 4) whose frames 0, 1, 6, 7 were kept at 2 fps: groups at 0.25 s and
# 3.25 s, both ties that "{:.1f}" rounds to even (0.2, 3.2).
VIDEO_GRID, VIDEO_INDICES, VIDEO_FPS = (2, 2, 4), [0, 1, 6, 7], 2.0


def hf_qwen3_video_text(text: str) -> tuple[str, list[float]]:
    """transformers' Qwen3VLProcessor.replace_video_token (5.24) applied to every <|video_pad|>,
    as its processor call does; returns the text and the timestamps it wrote."""
    from transformers.models.qwen3_vl.processing_qwen3_vl import Qwen3VLProcessor
    from transformers.video_utils import VideoMetadata

    fake = SimpleNamespace(
        video_processor=SimpleNamespace(merge_size=2, temporal_patch_size=2),
        vision_start_token="<|vision_start|>",
        vision_end_token="<|vision_end|>",
        video_token="<|video_pad|>",
    )
    fake._calculate_timestamps = lambda *a, **k: Qwen3VLProcessor._calculate_timestamps(fake, *a, **k)
    metadata = VideoMetadata(total_num_frames=8, fps=VIDEO_FPS, frames_indices=list(VIDEO_INDICES))
    inputs = {"video_grid_thw": torch.tensor([VIDEO_GRID]), "video_metadata": [metadata]}
    replacement = Qwen3VLProcessor.replace_video_token(fake, inputs, 0)
    timestamps = Qwen3VLProcessor._calculate_timestamps(fake, list(VIDEO_INDICES), VIDEO_FPS, 2)
    return replacement.join(text.split("<|video_pad|>")), timestamps


@pytest.mark.parametrize("template", sorted(QWEN3))
def test_qwen3_labels_are_the_assistant_turns(hf, tok, template):
    text_template = qwen3_template(template)
    checked = refused = videos_seen = 0
    for i, (msgs, tools) in enumerate(generated(120, seed=61)):
        n_img = sum(
            1
            for m in msgs
            if isinstance(m.get("content"), list)
            for c in m["content"]
            if c.get("type") in ("image", "image_url")
        )
        n_vid = sum(
            1 for m in msgs if isinstance(m.get("content"), list) for c in m["content"] if c.get("type") == "video"
        )
        grids, vgrids = [(1, 4, 2 + 2 * (k % 3)) for k in range(n_img)], [VIDEO_GRID] * n_vid
        text = hf.apply_chat_template(msgs, tools=tools, chat_template=text_template, tokenize=False)
        rendered_media = text.count("<|image_pad|>"), text.count("<|video_pad|>")
        text, timestamps = hf_qwen3_video_text(text)
        videos_seen += n_vid if rendered_media[1] == n_vid else 0
        for policy, newline in (("qwen", True), ("content_and_eos", False)):
            for train_reasoning in (True, False):
                kwargs = dict(
                    template=template,
                    tools=tools,
                    labels=policy,
                    train_reasoning=train_reasoning,
                    video_grids=vgrids,
                    video_timestamps=[timestamps] * n_vid,
                )
                if rendered_media != (n_img, n_vid):  # media the template does not print
                    with pytest.raises(ValueError, match="template renders .* move them to a user turn"):
                        mmfeed.encode_conversation(msgs, grids, tok, **kwargs)
                    refused += 1
                    continue
                out = mmfeed.encode_conversation(msgs, grids, tok, **kwargs)
                ids, labels = qwen3_reference_labels(hf, text, template, grids, None, newline, train_reasoning)
                assert out["input_ids"].tolist() == ids, i
                assert out["labels"].tolist() == labels, (i, policy, train_reasoning)
                checked += 1
    assert checked > 200 and videos_seen > 10
    if template == "qwen3-vl":
        assert refused > 0  # images in assistant turns or the system prompt


def test_thinking_labels_by_default_train_the_think_block(tok):
    msgs = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "Add them."},
    ]
    text = mmfeed.render_chat(msgs, template="qwen3-vl-thinking")
    assert text.endswith("<|im_start|>assistant\n<think>\nAdd them.\n</think>\n\n4<|im_end|>\n")
    trained = [
        t for t in mmfeed.encode_conversation(msgs, [], tok, template="qwen3-vl-thinking")["labels"] if t != -100
    ]
    assert tok.decode(trained) == "<think>\nAdd them.\n</think>\n\n4<|im_end|>\n"
    answer = mmfeed.encode_conversation(msgs, [], tok, template="qwen3-vl-thinking", train_reasoning=False)["labels"]
    assert tok.decode([t for t in answer if t != -100]) == "4<|im_end|>\n"


def test_tool_responses_are_never_trained(tok):
    msgs = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "tool_calls": [{"function": {"name": "w", "arguments": {"city": "Oslo"}}}]},
        {"role": "tool", "content": "rain"},
        {"role": "assistant", "content": "Rain."},
    ]
    for template in QWEN3:
        labels = mmfeed.encode_conversation(msgs, [], tok, template=template)["labels"]
        trained = tok.decode([t for t in labels if t != -100])
        assert "rain" not in trained and "tool_response" not in trained
        assert '<tool_call>\n{"name": "w", "arguments": {"city": "Oslo"}}\n</tool_call><|im_end|>\n' in trained


@pytest.mark.parametrize(
    "sample,message",
    [
        (
            {"messages": [{"role": "assistant", "content": "x", "tool_calls": {}}]},
            "messages[0].tool_calls must be a list of tool calls, got an object",
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"function": {"arguments": {}}}]}]},
            'messages[0].tool_calls[0].function has no "name"',
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"name": 3, "arguments": {}}]}]},
            "messages[0].tool_calls[0].name must be a string (the function's name), got a number",
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"function": "f"}]}]},
            "messages[0].tool_calls[0].function must be an object",
        ),
        (
            {"messages": [{"role": "assistant", "tool_calls": [{"name": "f"}]}]},
            'messages[0].tool_calls[0] has no "arguments"',
        ),
        (
            {"messages": [{"role": "assistant", "content": "x", "reasoning_content": 1}]},
            "messages[0].reasoning_content must be a string, got a number",
        ),
        (
            {"id": 9, "messages": [{"role": "user", "content": "x"}], "tools": ["f"]},
            "sample 9: tools[0] must be an object (a tool's JSON schema), got a string",
        ),
        ({"messages": [{"role": "user", "content": "x"}], "tools": {}}, "tools must be a list of tools"),
        ({"messages": [{"role": "assistant"}]}, 'messages[0] has no "content"'),
    ],
)
def test_bad_qwen3_fields_are_named_errors(sample, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        mmfeed.render_chat(sample, template="qwen3-vl")


def test_template_files_are_accepted_only_byte_identical(tmp_path):
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>x</think>Hello"}]
    for name, file in QWEN3.items():
        text = (TEMPLATES / file).read_text()
        want = mmfeed.render_chat(msgs, template=name)
        (tmp_path / file).write_text(text)
        assert mmfeed.render_chat(msgs, template=tmp_path / file) == want
        (tmp_path / "chat_template.json").write_text(json.dumps({"chat_template": text}))
        assert mmfeed.render_chat(msgs, template=tmp_path / "chat_template.json") == want
    assert mmfeed.render_chat(msgs, template=TEMPLATES / "qwen2_vl.jinja") == mmfeed.render_chat(msgs)
    mine = tmp_path / "mine.jinja"
    mine.write_text(qwen3_template("qwen3-vl").replace("# Tools", "# My tools"))
    with pytest.raises(ValueError, match=re.escape(f"chat template file '{mine}' is not byte-identical")):
        mmfeed.render_chat(msgs, template=mine)
    (tmp_path / "stripped.jinja").write_text(qwen3_template("qwen3-vl").rstrip("\n"))
    with pytest.raises(ValueError, match="is not byte-identical"):
        mmfeed.render_chat(msgs, template=tmp_path / "stripped.jinja")
    with pytest.raises(ValueError, match="chat template 'qwen4-vl' is neither a known name"):
        mmfeed.render_chat(msgs, template="qwen4-vl")
    with pytest.raises(ValueError, match="not a regular file"):
        mmfeed.render_chat(msgs, template=tmp_path)
