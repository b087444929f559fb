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
from transformers import PreTrainedTokenizerFast

import mmfeed
from conftest import ROOT

DATA = ROOT / "tests" / "data"
IMAGE_PAD, VIDEO_PAD = 151655, 151656


@pytest.fixture(scope="module")
def hf():
    template = (DATA / "chat-templates" / "qwen2_vl.jinja").read_text()
    return PreTrainedTokenizerFast(tokenizer_file=str(DATA / "qwen3-tokenizer" / "tokenizer.json"),
                                   chat_template=template)


@pytest.fixture(scope="module")
def tok():
    return mmfeed.Tokenizer.from_file(DATA / "qwen3-tokenizer" / "tokenizer.json")


def img(name):
    return {"type": "image", "image": name}


def txt(text):
    return {"type": "text", "text": text}


CONVERSATIONS = {
    "plain strings": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}],
    "system first": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": [img("a"), txt("What?")]},
                     {"role": "assistant", "content": [txt("A cat.")]}],
    "several images": [{"role": "user", "content": [img("a"), img("b"), txt("Compare."), img("c")]},
                       {"role": "assistant", "content": "They differ."}],
    "video": [{"role": "user", "content": [{"type": "video", "video": "v.mp4"}, txt("Describe")]},
              {"role": "assistant", "content": "It moves."}],
    "multi-turn": [{"role": "user", "content": [img("a"), txt("One?")]}, {"role": "assistant", "content": "Yes."},
                   {"role": "user", "content": [txt("Two?"), img("b")]},
                   {"role": "assistant", "content": [txt("\n  Spaced\n\nreply  ")]}],
    "empty text items": [{"role": "user", "content": [txt(""), img("a"), txt("")]},
                         {"role": "assistant", "content": [txt("")]}],
    "unicode": [{"role": "user", "content": "中文？ e\u0301 👨‍👩‍👧"}, {"role": "assistant", "content": "العربية 😀\r\n"}],
}


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_rendering_identical_to_apply_chat_template(hf, name):
    msgs = CONVERSATIONS[name]
    for gen in (False, True):
        for vid in (False, True):
            want = hf.apply_chat_template(msgs, tokenize=False, add_generation_prompt=gen, add_vision_id=vid)
            assert mmfeed.render_chat(msgs, add_generation_prompt=gen, add_vision_id=vid) == want


def test_llava_and_sharegpt_samples_render_as_their_messages(hf):
    llava = {"id": "l1", "image": ["a.jpg", "b.jpg"], "conversations": [
        {"from": "human", "value": "<image>\nCompare <image> please"}, {"from": "gpt", "value": "Same."}]}
    messages = [{"role": "user", "content": [img("a.jpg"), txt("\nCompare "), img("b.jpg"), txt(" please")]},
                {"role": "assistant", "content": [txt("Same.")]}]
    assert mmfeed.render_chat(llava) == hf.apply_chat_template(messages, tokenize=False)
    sharegpt = {"images": ["x.png"], "conversations": [{"from": "system", "value": "Sys"},
                                                       {"from": "user", "value": "<image>Hi"},
                                                       {"from": "assistant", "value": "Yo"}]}
    messages = [{"role": "system", "content": "Sys"}, {"role": "user", "content": [img("x.png"), txt("Hi")]},
                {"role": "assistant", "content": "Yo"}]
    assert mmfeed.render_chat(sharegpt) == hf.apply_chat_template(messages, tokenize=False)


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
            n = t * h * w // merge ** 2
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


@pytest.mark.parametrize("sample,message", [
    ({"messages": [{"content": "x"}]}, 'messages[0] has no "role" (expected "system", "user", "assistant" or "tool")'),
    ({"messages": [{"role": "user"}]}, 'messages[0] has no "content" (expected a string or a list of content items)'),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0] has unknown role 'wizard'"),
    ({"id": "s7", "messages": [{"role": "user", "content": [{"type": "audio"}]}]},
     "sample s7: messages[0].content[0] has no \"text\", \"image\" or \"video\" (type 'audio')"),
    ({"id": "s8", "messages": {}}, "sample s8: messages must be a list of messages, got an object"),
    ({"messages": [{"role": "user", "content": "q"}, {"role": "user", "content": [{"type": "text", "text": 5}]}]},
     "messages[1].content[0].text must be a string, got a number"),
    ({"conversations": [{"from": "human", "value": "<image> <image>"}], "image": "a.jpg"},
     "more <image> placeholders than images listed"),
    ({"conversations": [{"from": "human", "value": "hi"}], "images": ["a.jpg"]},
     "1 images listed but 0 <image> placeholders"),
    ({"conversations": [{"from": "alien", "value": "hi"}]}, "unknown speaker 'alien'"),
    ({"prompt": "x"}, "neither \"messages\" nor \"conversations\""),
])
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
    for decomposed, composed in [("\u1100\u1161\u11a8 yes", "\uac01 yes"), ("\u304b\u3099 x", "\u304c x"),
                                 ("\u212b x", "\u00c5 x")]:
        out = [mmfeed.encode_conversation([{"role": "user", "content": "q"}, {"role": "assistant", "content": reply}],
                                          [], tok) for reply in (decomposed, composed)]
        assert list(out[0]["input_ids"]) == list(out[1]["input_ids"]), decomposed
        assert list(out[0]["labels"]) == list(out[1]["labels"]), decomposed


def test_grids_the_merger_cannot_cut_are_refused(tok):
    # They crashed the process (an mrope index past the end, a division by zero) or looped.
    msgs = CONVERSATIONS["several images"]
    for grids, options, message in [([(1, 5, 5)] * 3, dict(mrope=True), r"grid \(1, 5, 5\) is not positive"),
                                    ([(1, 4, 4), (1, 4, 4), (0, 4, 4)], {}, r"grid \(0, 4, 4\)"),
                                    ([(1, 4, 4)] * 3, dict(merge_size=0), "merge_size 0 is not positive"),
                                    ([(1, 4, 4)] * 3, dict(merge_size=-2, mrope=True), "merge_size -2")]:
        with pytest.raises(ValueError, match=message):
            mmfeed.encode_conversation(msgs, grids, tok, **options)


def test_unknown_template_is_refused(tok):
    with pytest.raises(ValueError, match="chat template 'qwen3-vl' is not available"):
        mmfeed.render_chat(CONVERSATIONS["plain strings"], template="qwen3-vl")
