"""Conversations generated to reach every branch of the Qwen chat templates (system prompts,
media, inline and separate reasoning, tool calls and runs of tool responses, awkward text), shared
by the template tests (test_chat.py, test_qwen3_5.py)."""

import random


def img(name):
    return {"type": "image", "image": name}


def txt(text):
    return {"type": "text", "text": text}


SEED_CONVERSATIONS = 300
ALPHABET = list("abc xyz XYZ 0123 .,;:!?-_/") + [
    "\n",
    "\n\n",
    "\t",
    "\r",
    '"',
    "'",
    "\\",
    "{",
    "}",
    "[",
    "]",
    "é",
    "中文",
    "😀",
    "\u0000",
    "\u001f",
    "\u007f",
    "\u2028",
    "<tool_call>",
    "</tool_response>",
    "</think>",
    "<think>",
]


def rand_text(rng, tags=True, max_len=6):
    pool = ALPHABET if tags else [c for c in ALPHABET if not c.startswith("<")]
    return "".join(rng.choice(pool) for _ in range(rng.randrange(max_len + 1)))


def rand_number(rng):
    return rng.choice(
        [
            0,
            -1,
            7,
            2**63 - 1,
            -(2**63),
            2**64 - 1,
            0.0,
            -0.0,
            1.0,
            0.1,
            -2.5,
            1e16,
            1.5e16,
            1e15,
            123456789012345.6,
            1e-4,
            1e-5,
            5e-324,
            1.7976931348623157e308,
            3.141592653589793,
            1e22,
            rng.uniform(-1e6, 1e6),
            rng.random() * 10 ** rng.randrange(-30, 30),
            rng.randrange(-(10**12), 10**12),
        ]
    )


def rand_json(rng, depth=0):
    kind = rng.randrange(8 if depth < 3 else 5)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rand_number(rng)
    if kind in (3, 4):
        return rand_text(rng, max_len=8)
    if kind == 5:
        return [rand_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {rand_text(rng, tags=False, max_len=4) + str(i): rand_json(rng, depth + 1) for i in range(rng.randrange(4))}


def rand_tool(rng):
    return {
        "type": "function",
        "function": {
            "name": "f" + rand_text(rng, tags=False, max_len=3),
            "description": rand_text(rng),
            "parameters": rand_json(rng, 1),
        },
    }


def rand_content(rng, media=True, tool_response_text=False, audio=False):
    if tool_response_text and rng.random() < 0.5:
        return "<tool_response>\n" + rand_text(rng) + "\n</tool_response>"
    if rng.random() < 0.4:
        return rand_text(rng)
    items = []
    for _ in range(rng.randrange(4)):
        r = rng.random()
        if media and r < 0.25:
            items.append(img("i.jpg") if rng.random() < 0.8 else {"type": "image_url", "image_url": {"url": "u"}})
        elif media and r < 0.4:
            items.append({"type": "video", "video": "v.mp4"})
        elif audio and media and r < 0.55:  # only when asked: the other templates' sets stay as they were
            items.append({"type": "audio", "audio": "a.wav"} if rng.random() < 0.8 else {"audio_url": "b.mp3"})
        elif audio and r < 0.65:  # a text item without "type": "text" (Qwen3-Omni's template skips it)
            items.append({"text": rand_text(rng)} if rng.random() < 0.5 else {"type": "note", "text": rand_text(rng)})
        else:
            items.append(txt(rand_text(rng)))
    return items


def rand_tool_call(rng, string_arguments=0.3):
    args = (
        rand_text(rng)
        if rng.random() < string_arguments
        else {k: rand_json(rng, 1) for k in ("a", "b")[: rng.randrange(3)]}
    )
    call = {"name": "f" + rand_text(rng, tags=False, max_len=3), "arguments": args}
    return {"type": "function", "function": call} if rng.random() < 0.7 else call


def rand_assistant(rng, media, string_arguments=0.3, audio=False):
    m = {"role": "assistant"}
    shape = rng.randrange(4)
    if shape == 0:
        m["content"] = rand_content(rng, media=media, audio=audio)
    elif shape == 1:  # reasoning inline, as models emit it
        m["content"] = (
            rng.choice(["", "\n", "<think>", "<think>\n"])
            + rand_text(rng, tags=False)
            + rng.choice(["", "\n", "\n\n"])
            + "</think>"
            + rng.choice(["", "\n", "\n\n"])
            + rand_text(rng)
        )
    elif shape == 2:
        m["content"] = rand_content(rng, media=media, audio=audio)
        m[rng.choice(["reasoning_content", "reasoning_content", "thinking", "reasoning"])] = rng.choice(
            ["", "\n" + rand_text(rng, tags=False) + "\n", rand_text(rng, tags=False)]
        )
    else:
        m["content"] = rng.choice(["", rand_text(rng), [], [txt("")]])
    if rng.random() < 0.35:
        if rng.random() < 0.3:
            del m["content"]
        m["tool_calls"] = [rand_tool_call(rng, string_arguments) for _ in range(rng.randrange(1, 3))]
    return m


def rand_conversation(rng, media_in_assistant=True, string_arguments=0.3, audio=False):
    """A conversation exercising each branch of the Qwen3-VL templates: system prompt present
    or absent (string, list, images in it), user turns with images and videos, assistant turns
    with inline <think>, reasoning_content, tool calls, runs of tool responses (with media), a
    user turn that is itself a <tool_response>, a system message later on; with `audio`, audio
    items among the media (the Omni templates)."""
    msgs = []
    if rng.random() < 0.5:
        sys_content = rand_content(rng, media=rng.random() < 0.3, audio=audio)
        if isinstance(sys_content, list) and sys_content and rng.random() < 0.3:
            sys_content.append({"type": "image", "image": "s.jpg", "text": rand_text(rng)})
        msgs.append({"role": "system", "content": sys_content})
    for _ in range(rng.randrange(1, 4)):
        msgs.append({"role": "user", "content": rand_content(rng, tool_response_text=rng.random() < 0.2, audio=audio)})
        for _ in range(rng.randrange(3)):
            a = rand_assistant(rng, media_in_assistant, string_arguments, audio)
            msgs.append(a)
            if "tool_calls" in a or rng.random() < 0.3:
                for _ in range(rng.randrange(1, 4)):
                    msgs.append({"role": "tool", "content": rand_content(rng, audio=audio)})
        if rng.random() < 0.1:
            msgs.append({"role": "system", "content": rand_text(rng)})
    if rng.random() < 0.5:
        msgs.append(rand_assistant(rng, media_in_assistant, string_arguments, audio))
    tools = rng.choice([None, None, [], [rand_tool(rng) for _ in range(rng.randrange(1, 3))]])
    return msgs, tools


def generated(n, seed=16, **kwargs):
    rng = random.Random(seed)
    return [rand_conversation(rng, **kwargs) for _ in range(n)]
