"""The demo data set: real photographs in the formats a loader meets, and a JSONL manifest of
image conversations in several languages; with --videos, short clips panned over the same
photographs and a manifest of video conversations.

Usage:
    mmfeed make-dataset --out DIR --samples N --seed S [--max-megapixels MP] [--videos V]
                        [--format jsonl,wds [--per-shard K]] [--json]
    python tests/support/datagen.py ...   (the same; mmfeed make-dataset runs this file)

A development tool kept in the source tree, not in the package: the tests, the benchmarks and
`make demo` write their data with it (`import datagen` with tests/support on sys.path).

Everything is a pure function of (samples, seed, max-megapixels, the installed source photos and
Pillow): the same arguments write byte-identical files. Sources are the sample photographs that
scikit-image and scikit-learn bundle and, when Debian's gnome-backgrounds is installed, its
wallpapers. Each image is a variation of one source: a crop, a rescale to 0.2-12 megapixels and
an encoding (JPEG baseline or progressive, 4:2:0 or 4:4:4, gray or CMYK, EXIF-rotated; PNG RGB,
RGBA, gray, 16-bit gray or palette with transparency; WebP lossy, lossless or with alpha).

The manifest (DIR/manifest.jsonl) holds one sample per line in the Qwen/OpenAI shape:
    {"id": "demo-000003", "messages": [
        {"role": "user", "content": [{"type": "image", "image": "images/000005.jpg"},
                                     {"type": "text", "text": "What is in this picture?"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "A cat on a sofa."}]}]}
Image paths are relative to the manifest's directory.

The videos (DIR/videos/, written by the ffmpeg command, one encoder thread, so the same arguments
and ffmpeg write the same bytes) pan and zoom over a crop of a source photograph: H.264 in MP4 or
Matroska, VP9 in WebM, 320x240 to 1280x720, 24-30 fps, 2-8 s. DIR/videos.jsonl holds one
conversation per clip, some with an image beside it or the item's own sampling keys:
    {"id": "video-000001", "messages": [
        {"role": "user", "content": [{"type": "video", "video": "videos/000001.mp4", "fps": 1.0},
                                     {"type": "text", "text": "What happens in this clip?"}]}, ...]}
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image

GENERATOR_VERSION = 2
GNOME_BACKGROUNDS = Path("/usr/share/backgrounds/gnome")


def source_photos() -> list[Path]:
    """The real photographs variations are made from, in a fixed order."""
    import skimage.data
    import sklearn.datasets

    skimage_dir = Path(skimage.data.__file__).parent
    sklearn_dir = Path(sklearn.datasets.__file__).parent / "images"
    names = [
        "astronaut.png",
        "chelsea.png",
        "coffee.png",
        "rocket.jpg",
        "hubble_deep_field.jpg",
        "motorcycle_left.png",
        "camera.png",
        "retina.jpg",
    ]
    photos = [skimage_dir / n for n in names]
    photos += [sklearn_dir / "china.jpg", sklearn_dir / "flower.jpg"]
    if GNOME_BACKGROUNDS.is_dir():
        # Photographic and rendered wallpapers, 4-8 MB each; the 1x1 'vnc' ones are skipped.
        photos += sorted(p for p in GNOME_BACKGROUNDS.glob("*.webp") if p.stat().st_size > 100_000)
    missing = [str(p) for p in photos if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"source photos missing: {', '.join(missing)}")
    return photos


_SOURCE_CACHE: dict[str, Image.Image] = {}


def _load_source(path: Path) -> Image.Image:
    key = str(path)
    if key not in _SOURCE_CACHE:
        with Image.open(path) as img:
            img.load()
            _SOURCE_CACHE[key] = img.convert("L") if img.mode in ("L", "I;16") else img.convert("RGB")
    return _SOURCE_CACHE[key]


@dataclass
class ImageSpec:
    index: int
    source: str
    crop: tuple[int, int, int, int]
    size: tuple[int, int]  # width, height after the rescale
    kind: str  # e.g. "jpeg-progressive-444", "png-palette-alpha"
    ext: str
    options: dict


@dataclass
class ImageRecord:
    path: str
    kind: str
    width: int
    height: int
    bytes: int
    sha256: str


# name, weight, extension
_KINDS = [
    ("jpeg-baseline-420", 20, "jpg"),
    ("jpeg-baseline-444", 8, "jpg"),
    ("jpeg-progressive-420", 10, "jpg"),
    ("jpeg-progressive-444", 4, "jpg"),
    ("jpeg-gray", 5, "jpg"),
    ("jpeg-cmyk", 2, "jpg"),
    ("jpeg-exif-rotated", 4, "jpg"),
    ("png-rgb", 8, "png"),
    ("png-rgba", 6, "png"),
    ("png-gray", 3, "png"),
    ("png-gray16", 2, "png"),
    ("png-palette", 3, "png"),
    ("png-palette-alpha", 3, "png"),
    ("webp-lossy", 10, "webp"),
    ("webp-lossless", 4, "webp"),
    ("webp-alpha", 4, "webp"),
]
KINDS = {name: ext for name, _, ext in _KINDS}


def plan_image(index: int, seed: int, sources: list[Path], max_megapixels: float, kind: str | None = None) -> ImageSpec:
    """The variation image `index` gets; `kind` forces an encoding (one of KINDS)."""
    rng = random.Random(f"image:{seed}:{index}")
    source = sources[rng.randrange(len(sources))]
    with Image.open(source) as img:
        sw, sh = img.size
    # Crop: keep 35-100% of each side at a random place.
    cw = max(16, round(sw * rng.uniform(0.35, 1.0)))
    ch = max(16, round(sh * rng.uniform(0.35, 1.0)))
    x0 = rng.randrange(sw - cw + 1)
    y0 = rng.randrange(sh - ch + 1)
    # Rescale to a log-uniform pixel count in [0.2, max] megapixels, keeping the crop's aspect.
    lo, hi = math.log(0.2e6), math.log(max(0.2, max_megapixels) * 1e6)
    pixels = math.exp(rng.uniform(lo, hi))
    scale = math.sqrt(pixels / (cw * ch))
    size = (max(8, round(cw * scale)), max(8, round(ch * scale)))
    drawn = rng.choices(_KINDS, weights=[w for _, w, _ in _KINDS])[0][0]
    if kind is None:
        kind = drawn
    elif kind not in KINDS:
        raise ValueError(f"unknown image kind {kind!r}; known: {', '.join(KINDS)}")
    ext = KINDS[kind]
    options: dict = {}
    if kind.startswith("jpeg"):
        options["quality"] = rng.randint(60, 95)
    elif kind == "webp-lossy" or kind == "webp-alpha":
        options["quality"] = rng.randint(50, 92)
    if kind == "jpeg-exif-rotated":
        options["orientation"] = rng.choice([3, 6, 8])
    return ImageSpec(index, str(source), (x0, y0, x0 + cw, y0 + ch), size, kind, ext, options)


def _alpha_mask(size: tuple[int, int], rng: random.Random) -> Image.Image:
    """A soft elliptical alpha mask with a fully transparent border: real partial transparency."""
    w, h = size
    cx, cy = rng.uniform(0.3, 0.7) * w, rng.uniform(0.3, 0.7) * h
    rx, ry = rng.uniform(0.3, 0.6) * w, rng.uniform(0.3, 0.6) * h
    ys, xs = np.ogrid[0:h, 0:w]
    d = np.sqrt(((xs - cx) / rx) ** 2 + ((ys - cy) / ry) ** 2)
    alpha = np.clip((1.2 - d) * 255 / 0.4, 0, 255).astype(np.uint8)
    return Image.fromarray(alpha, "L")


def encode_image(spec: ImageSpec, seed: int) -> bytes:
    rng = random.Random(f"pixels:{seed}:{spec.index}")
    img = _load_source(Path(spec.source)).crop(spec.crop).resize(spec.size, Image.Resampling.LANCZOS)
    rgb = img.convert("RGB")
    out = io.BytesIO()
    kind, opts = spec.kind, spec.options
    if kind.startswith("jpeg"):
        params = {"quality": opts["quality"], "optimize": False}
        if kind in ("jpeg-baseline-420", "jpeg-progressive-420", "jpeg-exif-rotated"):
            params["subsampling"] = "4:2:0"
        elif kind.endswith("444"):
            params["subsampling"] = "4:4:4"
        if "progressive" in kind:
            params["progressive"] = True
        target = rgb
        if kind == "jpeg-gray":
            target = img.convert("L")
        elif kind == "jpeg-cmyk":
            target = rgb.convert("CMYK")
        elif kind == "jpeg-exif-rotated":
            # Store the pixels turned so that applying the EXIF orientation restores them.
            undo = {3: Image.Transpose.ROTATE_180, 6: Image.Transpose.ROTATE_90, 8: Image.Transpose.ROTATE_270}[
                opts["orientation"]
            ]
            target = rgb.transpose(undo)
            exif = Image.Exif()
            exif[0x0112] = opts["orientation"]
            params["exif"] = exif.tobytes()
        target.save(out, "JPEG", **params)
    elif kind == "png-rgb":
        rgb.save(out, "PNG", compress_level=6)
    elif kind == "png-rgba":
        rgba = rgb.copy()
        rgba.putalpha(_alpha_mask(rgb.size, rng))
        rgba.save(out, "PNG", compress_level=6)
    elif kind == "png-gray":
        img.convert("L").save(out, "PNG", compress_level=6)
    elif kind == "png-gray16":
        gray = np.asarray(img.convert("L"), dtype=np.uint16) * 257
        Image.fromarray(gray).save(out, "PNG", compress_level=6)
    elif kind in ("png-palette", "png-palette-alpha"):
        pal = rgb.quantize(colors=rng.choice([16, 64, 256]), method=Image.Quantize.MEDIANCUT)
        if kind == "png-palette-alpha":
            # The most common index becomes transparent (tRNS chunk).
            counts = np.bincount(np.asarray(pal).ravel())
            pal.save(out, "PNG", transparency=int(counts.argmax()))
        else:
            pal.save(out, "PNG")
    elif kind == "webp-lossy":
        rgb.save(out, "WEBP", quality=opts["quality"], method=4)
    elif kind == "webp-lossless":
        rgb.save(out, "WEBP", lossless=True, method=2)
    elif kind == "webp-alpha":
        rgba = rgb.copy()
        rgba.putalpha(_alpha_mask(rgb.size, rng))
        rgba.save(out, "WEBP", quality=opts["quality"], method=4)
    else:
        raise ValueError(f"unknown image kind {kind}")
    return out.getvalue()


def _write_image(args: tuple[ImageSpec, int, str]) -> ImageRecord:
    spec, seed, out_dir = args
    data = encode_image(spec, seed)
    rel = f"images/{spec.index:06d}.{spec.ext}"
    path = Path(out_dir) / rel
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return ImageRecord(rel, spec.kind, spec.size[0], spec.size[1], len(data), hashlib.sha256(data).hexdigest())


# --- conversations ----------------------------------------------------------------------------
# Our own short texts in several scripts; an answer strings 1-12 of its language's sentences.
_LANGS = {
    "en": {
        "ask": [
            "What is in this picture?",
            "Describe the image in detail.",
            "How many distinct objects can you count here?",
            "Compare these images. What do they have in common?",
            "Write a short caption for a museum label.",
            "Is there anything unusual about the lighting?",
        ],
        "follow": [
            "Can you say more about the background?",
            "What colours dominate?",
            "Would this work as a book cover? Why?",
            "Summarise that in one line.",
        ],
        "say": [
            "The scene is lit from the upper left, which leaves long soft shadows.",
            "In the foreground there is a subject in sharp focus.",
            "The background falls off into a gentle blur.",
            "Warm tones dominate, with a few cool accents near the edges.",
            "Several small details reward a closer look.",
            "The composition follows the rule of thirds quite closely.",
            "Nothing in the frame looks staged; it reads as a candid moment.",
            "Texture is the real subject here: grain, fibre and stone.",
            "I count at least five separate objects, two of them partly hidden.",
            "It would suit a cover, because the centre leaves room for a title.",
        ],
        "system": "You are a careful visual assistant. Answer precisely and say when you are unsure.",
    },
    "zh": {
        "ask": ["这张图片里有什么？", "请详细描述这幅图像。", "图中一共有几个物体？", "这几张图有什么共同点？"],
        "follow": ["背景里还有什么？", "主要是什么颜色？", "用一句话总结一下。"],
        "say": [
            "画面左上方的光线投下了柔和的长影。",
            "前景中的主体对焦清晰。",
            "背景逐渐虚化，层次分明。",
            "整体色调偏暖，边缘有少量冷色点缀。",
            "仔细看会发现许多小细节。",
            "构图大致符合三分法。",
            "这看起来像是一个自然抓拍的瞬间。",
        ],
        "system": "你是一个细心的视觉助手，请准确回答。",
    },
    "ar": {
        "ask": ["ماذا يوجد في هذه الصورة؟", "صف الصورة بالتفصيل.", "كم عدد الأشياء التي تراها؟"],
        "follow": ["ماذا عن الخلفية؟", "ما الألوان الغالبة؟"],
        "say": [
            "الإضاءة تأتي من الأعلى وتترك ظلالاً ناعمة.",
            "الموضوع في المقدمة واضح وحاد.",
            "الخلفية ضبابية بشكل لطيف.",
            "الألوان الدافئة هي الغالبة في المشهد.",
            "هناك تفاصيل صغيرة كثيرة تستحق النظر.",
        ],
        "system": "أنت مساعد بصري دقيق.",
    },
    "ja": {
        "ask": ["この画像には何が写っていますか？", "写真を詳しく説明してください。"],
        "follow": ["背景について教えてください。", "一言でまとめると？"],
        "say": [
            "左上からの光が柔らかい影を落としています。",
            "手前の被写体にピントが合っています。",
            "背景はなめらかにぼけています。",
            "暖色系の色が全体を占めています。",
        ],
        "system": "あなたは丁寧な画像アシスタントです。",
    },
    "emoji": {
        "ask": ["What vibe does this give? 🤔📸", "Rate this photo 1-10 ⭐ and explain 👇"],
        "follow": ["Any emoji that sums it up? 😄", "Would you post it? 📱"],
        "say": [
            "Cozy vibes all around ☕️🍂",
            "Solid 8/10 ⭐⭐⭐⭐⭐⭐⭐⭐ great light 🌅",
            "The family emoji 👨‍👩‍👧‍👦 fits the warmth here.",
            "Flags for the trip log: 🇯🇵🇫🇷🇧🇷",
            "Skin tones matter in captions too: 👋🏽👍🏿",
        ],
        "system": "Keep it short and friendly 😊",
    },
    "code": {
        "ask": [
            "Write Python that loads this image and prints its size.",
            "Give me a C++ snippet that crops the centre of this picture.",
        ],
        "follow": ["Now add error handling.", "Make it work for a whole folder."],
        "say": [
            "```python\nfrom PIL import Image\n\nwith Image.open(path) as im:\n    print(im.size)\n```",
            "```cpp\nauto crop = image.sub(w / 4, h / 4, w / 2, h / 2);\n```",
            "Wrap the call in `try: ... except OSError as err:` and report `err`.",
            "```python\nfor p in sorted(Path(folder).glob('*.jpg')):\n    print(p, Image.open(p).size)\n```",
            "\tIndentation and tabs\tmatter\r\nin some files, and CRLF line ends too.",
        ],
        "system": "You are a programming assistant. Reply with code first.",
    },
}
_LANG_WEIGHTS = {"en": 40, "zh": 20, "ar": 10, "ja": 10, "emoji": 10, "code": 10}


def make_conversation(sample: int, seed: int, image_paths: list[str]) -> tuple[dict, str]:
    """One sample: 1-4 turns; the first user turn shows the images, later turns may add one."""
    rng = random.Random(f"conversation:{seed}:{sample}")
    lang = rng.choices(list(_LANG_WEIGHTS), weights=list(_LANG_WEIGHTS.values()))[0]
    texts = _LANGS[lang]
    turns = rng.choices([1, 2, 3, 4], weights=[45, 30, 15, 10])[0]
    messages: list[dict] = []
    if rng.random() < 0.3:
        messages.append({"role": "system", "content": [{"type": "text", "text": texts["system"]}]})
    pending = list(image_paths)
    for turn in range(turns):
        if turn == turns - 1:
            take = len(pending)  # every planned image appears somewhere
        elif turn == 0:
            take = rng.randint(1, len(pending))
        else:
            take = min(len(pending), int(rng.random() < 0.5))
        content: list[dict] = [{"type": "image", "image": p} for p in pending[:take]]
        pending = pending[take:]
        question = rng.choice(texts["ask"] if turn == 0 else texts["follow"])
        if rng.random() < 0.5:
            content.append({"type": "text", "text": question})
        else:
            content.insert(0, {"type": "text", "text": question})
        messages.append({"role": "user", "content": content})
        sentences = rng.choices(texts["say"], k=rng.choice([1, 1, 2, 3, 5, 8, 12]))
        joiner = "" if lang in ("zh", "ja") else ("\n\n" if lang == "code" else " ")
        messages.append({"role": "assistant", "content": [{"type": "text", "text": joiner.join(sentences)}]})
    return {"id": f"demo-{sample:06d}", "messages": messages}, lang


# --- videos -----------------------------------------------------------------------------------
# name, weight, extension, ffmpeg encoder arguments (one thread: the same bytes every time)
_VIDEO_KINDS = [
    ("h264-mp4", 6, "mp4", ["-c:v", "libx264", "-preset", "fast", "-pix_fmt", "yuv420p", "-threads", "1"]),
    ("h264-mkv", 2, "mkv", ["-c:v", "libx264", "-preset", "fast", "-pix_fmt", "yuv420p", "-threads", "1"]),
    (
        "vp9-webm",
        2,
        "webm",
        ["-c:v", "libvpx-vp9", "-b:v", "600k", "-deadline", "realtime", "-cpu-used", "8", "-threads", "1"],
    ),
]
_VIDEO_SIZES = [((320, 240), 2), ((640, 360), 4), ((854, 480), 2), ((1280, 720), 1)]
_VIDEO_ASKS = [
    "What happens in this clip?",
    "Describe the camera movement.",
    "这段视频里发生了什么？",
    "Summarise the video in one sentence.",
    "ما الذي يحدث في هذا المقطع؟",
    "この動画を説明してください。",
]
_VIDEO_SAYS = [
    "The camera drifts slowly across the scene and closes in on the subject.",
    "A slow zoom: the frame narrows towards the centre while the light stays even.",
    "镜头缓缓推进，画面逐渐聚焦在主体上。",
    "The view pans from one side to the other without a cut.",
    "الكاميرا تقترب ببطء من الموضوع.",
    "カメラがゆっくりと被写体に近づいていきます。",
]


@dataclass
class VideoSpec:
    index: int
    source: str
    crop: tuple[int, int, int, int]
    size: tuple[int, int]
    fps: int
    seconds: float
    kind: str
    ext: str


@dataclass
class VideoRecord:
    path: str
    kind: str
    width: int
    height: int
    fps: int
    seconds: float
    bytes: int
    sha256: str


def plan_video(index: int, seed: int, sources: list[Path]) -> VideoSpec:
    rng = random.Random(f"video:{seed}:{index}")
    source = sources[rng.randrange(len(sources))]
    size = rng.choices([s for s, _ in _VIDEO_SIZES], weights=[w for _, w in _VIDEO_SIZES])[0]
    with Image.open(source) as img:
        sw, sh = img.size
    # The widest crop of the frame's aspect that fits, 60-100% of it, somewhere in the photo.
    aspect = size[0] / size[1]
    cw = min(sw, round(sh * aspect))
    scale = rng.uniform(0.6, 1.0)
    cw = max(32, round(cw * scale))
    ch = max(24, round(cw / aspect))
    x0, y0 = rng.randrange(sw - cw + 1), rng.randrange(max(1, sh - ch + 1))
    kind, _, ext, _ = rng.choices(_VIDEO_KINDS, weights=[w for _, w, _, _ in _VIDEO_KINDS])[0]
    return VideoSpec(
        index,
        str(source),
        (x0, y0, x0 + cw, y0 + min(ch, sh)),
        size,
        rng.choice([24, 25, 30]),
        rng.choice([2.0, 3.0, 4.0, 6.0, 8.0]),
        kind,
        ext,
    )


def _write_video(args: tuple[VideoSpec, int, str]) -> VideoRecord:
    spec, seed, out_dir = args
    if shutil.which("ffmpeg") is None:
        raise OSError("the ffmpeg command is missing (scripts/setup.sh installs it); needed for --videos")
    rng = random.Random(f"motion:{seed}:{spec.index}")
    w, h = spec.size
    frames = round(spec.fps * spec.seconds)
    # The crop at twice the frame size, so the zoom has pixels to spend.
    still = (
        _load_source(Path(spec.source)).convert("RGB").crop(spec.crop).resize((2 * w, 2 * h), Image.Resampling.LANCZOS)
    )
    zoom = rng.uniform(0.0005, 0.002)
    pan = rng.choice(["iw/2-(iw/zoom/2)", f"(iw-iw/zoom)*on/{frames}"])
    rel = f"videos/{spec.index:06d}.{spec.ext}"
    path = Path(out_dir) / rel
    encoder = next(args for name, _, _, args in _VIDEO_KINDS if name == spec.kind)
    with tempfile.TemporaryDirectory() as tmp:
        png = Path(tmp) / "still.png"
        still.save(png)
        tmp_out = Path(tmp) / f"clip.{spec.ext}"
        subprocess.run(
            [
                "ffmpeg",
                "-hide_banner",
                "-loglevel",
                "error",
                "-y",
                "-i",
                str(png),
                "-vf",
                f"zoompan=z='min(zoom+{zoom:.5f},1.6)':x='{pan}':y='ih/2-(ih/zoom/2)':d={frames}:"
                f"s={w}x{h}:fps={spec.fps}",
                "-frames:v",
                str(frames),
                *encoder,
                "-fflags",
                "+bitexact",
                "-flags:v",
                "+bitexact",
                str(tmp_out),
            ],
            check=True,
            timeout=600,
            capture_output=True,
        )
        data = tmp_out.read_bytes()
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return VideoRecord(rel, spec.kind, w, h, spec.fps, spec.seconds, len(data), hashlib.sha256(data).hexdigest())


def make_video_conversation(index: int, seed: int, video: str, image: str | None) -> dict:
    rng = random.Random(f"video-conversation:{seed}:{index}")
    item: dict = {"type": "video", "video": video}
    keys = rng.choice([{}, {}, {"fps": 1.0}, {"nframes": 8}, {"max_pixels": 200_704}])
    item.update(keys)
    content = [item] + ([{"type": "image", "image": image}] if image else [])
    content.append({"type": "text", "text": rng.choice(_VIDEO_ASKS)})
    messages = [
        {"role": "user", "content": content},
        {"role": "assistant", "content": [{"type": "text", "text": rng.choice(_VIDEO_SAYS)}]},
    ]
    return {"id": f"video-{index:06d}", "messages": messages}


def tagged_form(sample: dict, shape: str = "messages") -> dict:
    """`sample` (the Qwen/OpenAI shape this module writes) as LLaMA-Factory and ms-swift write it:
    string contents with <image>/<video> tags, the media in top-level "images"/"videos" lists in
    the order of their tags, a leading system message as the "system" key. shape="messages"
    keeps role/content turns; "conversations" writes ShareGPT's from/value turns (human/gpt)."""
    images, videos, turns, system = [], [], [], None
    for i, m in enumerate(sample["messages"]):
        content = m["content"]
        if isinstance(content, str):
            text = content
        else:
            text = ""
            for item in content:
                if item.get("type") == "image":
                    images.append(item["image"])
                    text += "<image>"
                elif item.get("type") == "video":
                    if set(item) - {"type", "video"}:
                        raise ValueError(f"{sample['id']}: a video item's own keys have no tagged form")
                    videos.append(item["video"])
                    text += "<video>"
                else:
                    text += item["text"]
        if i == 0 and m["role"] == "system":
            system = text
        else:
            turns.append((m["role"], text))
    out: dict = {"id": sample["id"]}
    if shape == "messages":
        out["messages"] = [{"role": role, "content": text} for role, text in turns]
    else:
        speaker = {"user": "human", "assistant": "gpt"}
        out["conversations"] = [{"from": speaker.get(role, role), "value": text} for role, text in turns]
    if system is not None:
        out["system"] = system
    if images:
        out["images"] = images
    if videos:
        out["videos"] = videos
    return out


def shard_form(sample: dict, root: Path, tagged: bool = False) -> tuple[str, dict[str, bytes]]:
    """`sample` as a WebDataset sample: its key (the id, dots made dashes) and members, the
    conversation as "json" with each image and video reference renamed to the member holding its
    bytes ("0.jpg", "1.png", ...; read from `root`, the manifest's folder). tagged=True writes
    the conversation in LLaMA-Factory's tagged shape (tagged_form)."""
    sample = json.loads(json.dumps(sample))
    members: dict[str, bytes] = {}
    for m in sample["messages"]:
        for item in m["content"] if isinstance(m["content"], list) else []:
            kind = item.get("type")
            if kind in ("image", "video"):
                path = item[kind]
                suffix = f"{len(members)}{Path(path).suffix.lower()}"
                members[suffix] = (root / path).read_bytes()
                item[kind] = suffix
    conversation = tagged_form(sample) if tagged else sample
    members["json"] = json.dumps(conversation, ensure_ascii=False).encode()
    return sample["id"].replace(".", "-"), members


def write_shards(manifest: Path, out: Path, per_shard: int, tagged_every: int = 0) -> list[Path]:
    """The manifest's samples as WebDataset shards written by webdataset's own TarWriter:
    out/shard-000.tar, ... with `per_shard` samples each (every `tagged_every`-th sample in the
    tagged shape when > 0)."""
    import webdataset

    out.mkdir(parents=True, exist_ok=True)
    samples = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    paths = []
    for first in range(0, len(samples), per_shard):
        path = out / f"shard-{first // per_shard:03d}.tar"
        with webdataset.TarWriter(str(path)) as writer:
            for i, sample in enumerate(samples[first : first + per_shard], start=first):
                key, members = shard_form(sample, manifest.parent, tagged=tagged_every > 0 and i % tagged_every == 0)
                writer.write({"__key__": key, **members})
        paths.append(path)
    return paths


def parquet_form(sample: dict, root: Path) -> dict:
    """`sample` as a row of an image-text Parquet set on the Hugging Face hub: LLaMA-Factory's
    tagged shape (tagged_form), its images' bytes inline (each an `Image()` cell; read from
    `root`, the manifest's folder), its videos' paths as written, every column present (null or
    empty where the sample has none)."""
    row = tagged_form(sample)
    return {
        "id": row["id"],
        "messages": row["messages"],
        "system": row.get("system"),
        "images": [{"bytes": (root / p).read_bytes(), "path": None} for p in row.get("images", [])],
        "videos": row.get("videos", []),
    }


def write_parquet(manifest: Path, out: Path, per_file: int, writer: str = "datasets", **pyarrow_options) -> list[Path]:
    """The manifest's samples as Parquet files out/train-00000.parquet, ... with `per_file` rows each
    (parquet_form). writer="datasets" writes as Hugging Face datasets does (`Dataset.to_parquet`,
    `Image()` features: images uncompressed and PLAIN, a page index); "pyarrow" writes the same
    table with pyarrow.parquet.write_table and `pyarrow_options` (its defaults: dictionary pages,
    snappy, no page index)."""
    import datasets
    import pyarrow.parquet as pq

    datasets.disable_progress_bars()
    features = datasets.Features(
        {
            "id": datasets.Value("string"),
            "messages": datasets.List({"role": datasets.Value("string"), "content": datasets.Value("string")}),
            "system": datasets.Value("string"),
            "images": datasets.List(datasets.Image()),
            "videos": datasets.List(datasets.Value("string")),
        }
    )
    out.mkdir(parents=True, exist_ok=True)
    samples = [json.loads(line) for line in manifest.read_text().splitlines() if line.strip()]
    paths = []
    for first in range(0, len(samples), per_file):
        rows = [parquet_form(s, manifest.parent) for s in samples[first : first + per_file]]
        table = datasets.Dataset.from_list(rows, features=features)
        path = out / f"train-{first // per_file:05d}.parquet"
        if writer == "datasets":
            table.to_parquet(str(path))
        else:
            pq.write_table(table.data.table, path, **pyarrow_options)
        paths.append(path)
    return paths


def _ffmpeg_version() -> str:
    if shutil.which("ffmpeg") is None:
        return ""
    return subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.split("\n")[0]


def generate(
    out: Path, samples: int, seed: int, max_megapixels: float = 12.0, workers: int | None = None, videos: int = 0
) -> dict:
    """Writes the data set under `out` and returns its summary (also saved as dataset.json).

    A directory already holding the same data set (same arguments, all files present with
    their recorded hashes' sizes) is left as it is; one with videos also serves a caller that
    asks for none.
    """
    if samples <= 0:
        raise ValueError("--samples must be positive")
    if videos < 0:
        raise ValueError("--videos must not be negative")
    params = {
        "generator": GENERATOR_VERSION,
        "samples": samples,
        "seed": seed,
        "max_megapixels": max_megapixels,
        "pillow": Image.__version__,
    }
    if videos:
        params.update(videos=videos, ffmpeg=_ffmpeg_version())
    out = Path(out)
    info_path = out / "dataset.json"
    if info_path.is_file():
        info = json.loads(info_path.read_text())
        stored = info.get("params", {})
        images_only = {k: v for k, v in stored.items() if k not in ("videos", "ffmpeg")}
        if (stored == params or (not videos and images_only == params)) and all(
            (out / rec["path"]).is_file() and (out / rec["path"]).stat().st_size == rec["bytes"]
            for rec in info["images"] + info.get("videos", [])
        ):
            info["summary"]["reused"] = True
            return info["summary"]

    sources = source_photos()
    (out / "images").mkdir(parents=True, exist_ok=True)
    plan_rng = random.Random(f"plan:{seed}")
    counts = [plan_rng.choices([1, 2, 3], weights=[60, 25, 15])[0] for _ in range(samples)]
    specs = [plan_image(i, seed, sources, max_megapixels) for i in range(sum(counts))]
    video_specs = [plan_video(i, seed, sources) for i in range(videos)]
    if video_specs:
        (out / "videos").mkdir(exist_ok=True)
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        records = list(pool.map(_write_image, [(s, seed, str(out)) for s in specs], chunksize=1))
        video_records = list(pool.map(_write_video, [(s, seed, str(out)) for s in video_specs], chunksize=1))

    lines, langs, turns = [], {}, {}
    next_image = 0
    for sample, n in enumerate(counts):
        paths = [records[next_image + k].path for k in range(n)]
        next_image += n
        conv, lang = make_conversation(sample, seed, paths)
        langs[lang] = langs.get(lang, 0) + 1
        t = sum(1 for m in conv["messages"] if m["role"] == "user")
        turns[t] = turns.get(t, 0) + 1
        lines.append(json.dumps(conv, ensure_ascii=False))
    manifest = out / "manifest.jsonl"
    tmp = manifest.with_suffix(".jsonl.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, manifest)

    if video_records:
        pick = random.Random(f"video-images:{seed}")
        video_lines = [
            json.dumps(
                make_video_conversation(i, seed, r.path, pick.choice(records).path if pick.random() < 0.25 else None),
                ensure_ascii=False,
            )
            for i, r in enumerate(video_records)
        ]
        tmp = (out / "videos.jsonl").with_suffix(".jsonl.tmp")
        tmp.write_text("\n".join(video_lines) + "\n", encoding="utf-8")
        os.replace(tmp, out / "videos.jsonl")

    kinds: dict[str, int] = {}
    for r in records:
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
    mps = [r.width * r.height / 1e6 for r in records]
    summary = {
        "out": str(out),
        "manifest": str(manifest),
        "samples": samples,
        "images": len(records),
        "bytes": sum(r.bytes for r in records),
        "megapixels": {
            "min": round(min(mps), 3),
            "median": round(statistics.median(mps), 3),
            "max": round(max(mps), 3),
        },
        "kinds": dict(sorted(kinds.items())),
        "languages": dict(sorted(langs.items())),
        "turns": {str(k): v for k, v in sorted(turns.items())},
        "sources": len(sources),
        "reused": False,
    }
    if video_records:
        summary["videos"] = {
            "manifest": str(out / "videos.jsonl"),
            "count": len(video_records),
            "bytes": sum(r.bytes for r in video_records),
            "seconds": sum(r.seconds for r in video_records),
            "kinds": {k: sum(1 for r in video_records if r.kind == k) for k, *_ in _VIDEO_KINDS},
        }
    info = {
        "params": params,
        "summary": summary,
        "images": [asdict(r) for r in records],
        "videos": [asdict(r) for r in video_records],
    }
    info_path.write_text(json.dumps(info, indent=1, ensure_ascii=False) + "\n")
    return summary


def format_summary(s: dict) -> str:
    lines = [
        f"demo data set: {s['samples']} samples, {s['images']} images, "
        f"{s['bytes'] / 1e6:.1f} MB{' (already present, reused)' if s['reused'] else ''}",
        f"  manifest   {s['manifest']}",
        f"  megapixels min {s['megapixels']['min']}  median {s['megapixels']['median']}  "
        f"max {s['megapixels']['max']}  (from {s['sources']} source photos)",
        "  formats    " + ", ".join(f"{k} {v}" for k, v in s["kinds"].items()),
        "  languages  " + ", ".join(f"{k} {v}" for k, v in s["languages"].items()),
        "  user turns " + ", ".join(f"{k}: {v}" for k, v in s["turns"].items()),
    ]
    if "videos" in s:
        v = s["videos"]
        lines.append(
            f"  videos     {v['count']} clips, {v['seconds']:.0f} s, {v['bytes'] / 1e6:.1f} MB ("
            + ", ".join(f"{k} {n}" for k, n in v["kinds"].items())
            + f"): {v['manifest']}"
        )
    if "wds" in s:
        lines.append(f"  shards     {s['wds']} (WebDataset)")
    if "parquet" in s:
        lines.append(f"  parquet    {s['parquet']} (images inline)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="mmfeed make-dataset", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="directory to write")
    parser.add_argument("--samples", type=int, default=64, help="number of samples (default 64)")
    parser.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    parser.add_argument("--max-megapixels", type=float, default=12.0, help="largest image, in megapixels (default 12)")
    parser.add_argument("--workers", type=int, default=None, help="encoder processes (default: cores)")
    parser.add_argument(
        "--videos",
        type=int,
        default=0,
        help="also write this many clips and videos.jsonl (default 0; needs the ffmpeg command)",
    )
    parser.add_argument(
        "--format",
        default="jsonl",
        help="jsonl (the manifest beside the images); add wds for the samples also as WebDataset "
        "shards in DIR/wds/ (--per-shard each; needs webdataset), parquet for Parquet files "
        "in DIR/parquet/ as Hugging Face datasets writes them (--per-shard rows each, the "
        "images' bytes inline): jsonl,wds,parquet",
    )
    parser.add_argument(
        "--per-shard", type=int, default=32, help="samples per WebDataset shard or Parquet file (default 32)"
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    args = parser.parse_args(argv)
    formats = set(args.format.split(","))
    known = {"jsonl", "wds", "parquet"}
    if not formats <= known:
        parser.error(f"--format takes jsonl, wds and parquet, not {','.join(sorted(formats - known))}")
    try:
        summary = generate(args.out, args.samples, args.seed, args.max_megapixels, args.workers, args.videos)
        if "wds" in formats:
            shards = write_shards(args.out / "manifest.jsonl", args.out / "wds", args.per_shard)
            summary["wds"] = f"{args.out / 'wds'}/shard-{{000..{len(shards) - 1:03d}}}.tar"
        if "parquet" in formats:
            files = write_parquet(args.out / "manifest.jsonl", args.out / "parquet", args.per_shard)
            summary["parquet"] = f"{args.out / 'parquet'}/train-{{00000..{len(files) - 1:05d}}}.parquet"
    except (OSError, ValueError, subprocess.CalledProcessError) as err:
        print(f"mmfeed make-dataset: {err}", file=sys.stderr)
        return 1
    print(json.dumps(summary, ensure_ascii=False) if args.json else format_summary(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
