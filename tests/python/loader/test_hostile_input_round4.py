"""Issue 48, hostile input round 4: each finding refused by name before memory is committed,
never a crash, an abort or a hang. (The http(s) error pages are in test_untrusted_sources.py, the
CLI on manifests without images in tools/test_cli.py, the C++ halves beside their code.)"""

import json
import os
import subprocess
import sys

import pytest
from conftest import ROOT, ffmpeg

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"


def conversation(*content, sid="s"):
    return {
        "id": sid,
        "messages": [
            {"role": "user", "content": [*content, {"type": "text", "text": "?"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "an answer"}]},
        ],
    }


def write_jsonl(path, *lines):
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def first_error(source, **options):
    """The Loader's first error over `source`, as its errors() reports it, after the run failed."""
    options = {"tokenizer": TOKENIZER, "tensors": "np", "max_error_fraction": 1.0, **options}
    with mmfeed.Loader(source, **options) as loader:
        with pytest.raises(ValueError):
            list(loader)
        return loader.errors()


# ---- blends: sizes an epoch's order cannot hold ------------------------------------------------


@pytest.fixture(scope="module")
def two_manifests(tmp_path_factory):
    root = tmp_path_factory.mktemp("blend")
    a = write_jsonl(root / "a.jsonl", conversation(sid="a0"), conversation(sid="a1"))
    b = write_jsonl(root / "b.jsonl", conversation(sid="b0"))
    return [a, b]


@pytest.mark.parametrize(
    "options, option",
    [
        ({"weights": [1, 1], "blend_samples": 300_000_000}, "blend_samples"),
        ({"weights": [1, 1], "blend_samples": 10**12}, "blend_samples"),
        ({"weights": [1, 1], "blend_samples": 2**63}, "blend_samples"),
        ({"source_repeats": [1e15, 1]}, "source_repeats"),
        ({"source_repeats": [1e300, 1]}, "source_repeats"),
        ({"source_repeats": [1, 1], "blend_samples": 2**64 - 1}, "blend_samples"),
    ],
)
def test_issue48_blend_sizes_past_what_an_order_holds_are_a_value_error_naming_the_option(
    two_manifests, options, option
):
    # They aborted the process (an uncaught bad_alloc or length_error on the engine thread).
    with mmfeed.Loader(two_manifests, tokenizer=TOKENIZER, tensors="np", **options) as loader:
        with pytest.raises(ValueError, match=rf"LoaderConfig\.{option}: an epoch of .* draws: its order would hold"):
            next(iter(loader))


def test_issue48_a_blend_within_max_manifest_bytes_runs_and_one_past_it_is_refused(two_manifests):
    # 20 bytes a draw: 100 draws fit in 2,000 bytes, not in 1,999.
    common = {"tokenizer": TOKENIZER, "tensors": "np", "weights": [1, 1], "blend_samples": 100, "batch_size": 50}
    with mmfeed.Loader(two_manifests, max_manifest_bytes=2000, **common) as loader:
        assert sum(len(b["sample_ids"]) for b in loader) == 100
    with mmfeed.Loader(two_manifests, max_manifest_bytes=1999, **common) as loader:
        with pytest.raises(ValueError, match=r"more than max_manifest_bytes \(1999\) allows \(99 draws\)"):
            next(iter(loader))


# ---- audio: what a clip holds at its own rate ---------------------------------------------------


def flac_of_silence(path, rate, seconds, stated_seconds=None):
    """A FLAC of `seconds` of silence at `rate`; its STREAMINFO then made to state
    `stated_seconds` (0: an unknown length, as a streaming encoder leaves it)."""
    ffmpeg("-f", "lavfi", "-i", f"anullsrc=r={rate}:cl=mono", "-t", seconds, "-c:a", "flac", path)
    if stated_seconds is not None:
        data = bytearray(path.read_bytes())
        assert data[:4] == b"fLaC" and data[4] & 0x7F == 0  # STREAMINFO first
        total = int(stated_seconds * rate)
        # The 36-bit total sample count: the low nibble of byte 13 of STREAMINFO, then 4 bytes.
        data[8 + 13] = (data[8 + 13] & 0xF0) | (total >> 32)
        data[8 + 14 : 8 + 18] = (total & 0xFFFFFFFF).to_bytes(4, "big")
        path.write_bytes(bytes(data))
    return path


@pytest.fixture(scope="module")
def omni(tmp_path_factory):
    from omni_reference import omni_model

    root = tmp_path_factory.mktemp("audio48")
    (root / "tokenizer.json").write_text(omni_model("qwen2.5-omni").json)
    flac_of_silence(root / "declares-2000s.flac", 384000, 2, stated_seconds=2000)
    flac_of_silence(root / "silence-800s.flac", 384000, 800)
    flac_of_silence(root / "unstated-800s.flac", 384000, 800, stated_seconds=0)
    flac_of_silence(root / "short.flac", 44100, 1)
    return root


def audio_sample(name, sid):
    return conversation({"type": "audio", "audio": name}, sid=sid)


def test_issue48_a_clip_that_cannot_fit_is_refused_by_the_loader_before_it_is_decoded(omni):
    # 2,000 s at 384 kHz: 3.07 GB of samples, past the default byte budget (2 GiB), stated by a
    # small file's header. It died with SIGSEGV when the allocation failed.
    manifest = write_jsonl(omni / "big.jsonl", audio_sample("declares-2000s.flac", "big"))
    errors = first_error(manifest, model="qwen2.5-omni", tokenizer=omni / "tokenizer.json")
    assert len(errors) == 1 and errors[0]["stage"] == "audio", errors
    assert errors[0]["reason"].endswith(
        "declares-2000s.flac: audio: 2000 s at 384000 Hz are 3072000000 bytes of samples, "
        "more than the 2147483648 a clip may hold (max_buffered_bytes)"
    ), errors[0]["reason"]


LOADER_SCRIPT = """
import json, resource, sys
import mmfeed
manifest, tokenizer, budget = sys.argv[1], sys.argv[2], int(sys.argv[3])
with mmfeed.Loader(manifest, tokenizer=tokenizer, model="qwen2.5-omni", tensors="np", shuffle=False,
                   max_buffered_bytes=budget, max_error_fraction=1.0, batch_size=1) as loader:
    delivered = [b["sample_ids"][0] for b in loader]
    errors = loader.errors()
print(json.dumps({"delivered": delivered, "errors": errors}))
"""


def run_loader_measured(manifest, tokenizer, budget):
    proc = subprocess.Popen(
        [sys.executable, "-c", LOADER_SCRIPT, manifest, tokenizer, str(budget)], stdout=subprocess.PIPE, text=True
    )
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return json.loads(out), usage.ru_maxrss * 1024


def test_issue48_decoded_audio_counts_at_the_files_own_rate_against_the_byte_budget(omni):
    # 800 s of silence at 384 kHz, 147 KB of FLAC: 1.2 GB of samples at its own rate. It was
    # counted at 16 kHz (51 MB), grew memory by 2.7 GB under a 64 MiB budget and was delivered.
    # Stated or not, it is refused, and the process stays within the budget of the control run.
    budget = 64 << 20
    tokenizer = omni / "tokenizer.json"
    control, control_peak = run_loader_measured(
        write_jsonl(omni / "control.jsonl", audio_sample("short.flac", "short")), tokenizer, budget
    )
    assert control["delivered"] == ["short"]
    for name in ("silence-800s.flac", "unstated-800s.flac"):
        manifest = write_jsonl(omni / f"{name}.jsonl", audio_sample("short.flac", "short"), audio_sample(name, "long"))
        report, peak = run_loader_measured(manifest, tokenizer, budget)
        assert report["delivered"] == ["short"], report
        (error,) = report["errors"]
        assert error["sample_id"] == "long" and error["stage"] == "audio"
        assert error["reason"].endswith(f"more than the {budget} a clip may hold (max_buffered_bytes)"), error
        # Unbounded, the clip alone took 1.2 GB (2.7 GB at the peak).
        assert peak < control_peak + 2 * budget, (name, peak, control_peak)


LOAD_AUDIO_SCRIPT = """
import resource, sys
import mmfeed
data = open(sys.argv[1], "rb").read()
with open("/proc/self/status") as f:
    size = int(f.read().split("VmSize:")[1].split()[0]) * 1024
limit = size + int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    print("samples", len(mmfeed.load_audio(data)))
except ValueError as e:
    print("refused", e)
"""


@pytest.mark.parametrize(
    "name, outcome",
    [
        # 800 s at 384 kHz decodes into 1.2 GB: room for it and its 16 kHz samples, not for a
        # second copy (libsoxr queued its whole input and crashed when that allocation failed).
        ("silence-800s.flac", "samples 12800000"),
        # A header stating 2,000 s: 3 GB of samples asked for at once.
        ("declares-2000s.flac", "refused audio: the clip's samples do not fit in memory; lower max_seconds"),
    ],
)
def test_issue48_load_audio_out_of_memory_is_a_value_error_not_a_crash(omni, name, outcome):
    # Address space past what the interpreter maps at the start: the clip and its resampling fit
    # (1.3 GB), a second copy of the clip (2.5 GB in all) does not.
    headroom = 1_900_000_000
    # One malloc arena: threads' arenas reserve address space by the 64 MB, however many the
    # machine's cores make.
    proc = subprocess.run(
        [sys.executable, "-c", LOAD_AUDIO_SCRIPT, omni / name, str(headroom)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MALLOC_ARENA_MAX": "1"},
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() == outcome


# ---- Energon split files -----------------------------------------------------------------------


def energon_dir(root, split_yaml):
    (root / ".nv-meta").mkdir(parents=True)
    (root / ".nv-meta" / "split.yaml").write_text(split_yaml)
    return root


@pytest.mark.parametrize(
    "name, split, refusal",
    [
        (
            "long-prefix",
            "split_parts:\n  train:\n    - '" + "p" * 20_000 + "{0..1000000}.tar'\n",
            "split_parts.train: " + "p" * 200 + r"\.\.\. \(20016 bytes\): the pattern's names take more than",
        ),
        (
            "many-patterns",
            "split_parts:\n  train:\n" + "".join(f"    - 'p{i}-{{0..1000000}}.tar'\n" for i in range(50)),
            r"split_parts\.train: p1-\{0\.\.1000000\}\.tar: the pattern names more than the 48575 shards left",
        ),
        (
            "excluded-all",
            "split_parts:\n  train:\n    - 'shard-{0..299999}.tar'\nexclude:\n  - 'shard-{0..299999}.tar'\n",
            "its train split names no shard",
        ),
    ],
)
def test_issue48_energon_split_files_are_bounded_before_names_are_made(tmp_path, name, split, refusal):
    # They expanded to 3-4 GB of names (a 20 KB file), or matched 300k excludes against 300k
    # shards name by name (minutes; 1M x 1M: 40 min).
    dataset = energon_dir(tmp_path / name, split)
    with mmfeed.Loader(dataset, tokenizer=TOKENIZER, tensors="np") as loader:
        with pytest.raises(ValueError, match=refusal):
            next(iter(loader))


# ---- Parquet: decoded sizes, not encoded ones --------------------------------------------------


PARQUET_SCRIPT = """
import json, sys
import mmfeed
source, tokenizer, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
options = {"max_manifest_bytes": limit} if limit else {}
try:
    with mmfeed.Loader(source, tokenizer=tokenizer, tensors="np", **options) as loader:
        next(iter(loader))
    print("opened")
except ValueError as e:
    print(e)
"""


def open_measured(source, limit=0):
    proc = subprocess.Popen(
        [sys.executable, "-c", PARQUET_SCRIPT, source, TOKENIZER, str(limit)], stdout=subprocess.PIPE, text=True
    )
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out
    return out.strip(), usage.ru_maxrss * 1024


def test_issue48_a_dictionary_value_every_row_refers_to_is_refused_before_it_is_copied(tmp_path):
    # One 64 KiB value referenced by 400,000 rows: a 5 KB file whose footer states a few KB, read
    # densely as 26 GB (2.1 GB committed before Arrow refused).
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 400_000
    text = pa.array(["x" * 65536] * 1, pa.string())
    table = pa.table(
        {
            "messages": pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), text),
            "note": pa.DictionaryArray.from_arrays(pa.array([0] * rows, pa.int32()), text),
        }
    )
    path = tmp_path / "bomb.parquet"
    pq.write_table(table, path, row_group_size=rows)
    assert path.stat().st_size < 20_000
    message, peak = open_measured(path)
    assert "bytes of strings written out, more than max_manifest_bytes (4294967296) leaves" in message, message
    assert str(path) in message
    _, control_peak = open_measured(tmp_path / "missing.parquet")
    assert peak < control_peak + 200_000_000, (peak, control_peak)


def test_issue48_decoded_columns_count_against_max_manifest_bytes(tmp_path):
    # 2,000,000 int64 values of one run: 16 MB decoded from a few KB of RLE. Within 8 MB the file
    # is refused from its footer's value counts.
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "runs.parquet"
    pq.write_table(pa.table({"n": pa.array([7] * 2_000_000, pa.int64())}), path)
    message, _ = open_measured(path, 8 << 20)
    assert "bytes decoded, more than max_manifest_bytes (8388608)" in message, message


def test_issue48_an_image_page_that_inflates_past_max_object_bytes_is_refused_before_it_is(tmp_path):
    # A zstd page of 27 KB that inflates to 800 MB was decompressed whole, and only the image
    # decoder's own 512 MiB limit refused it. The page is now refused as it asks for the memory.
    import pyarrow as pa
    import pyarrow.parquet as pq

    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    big = b"\0" * (96 << 20)
    table = pa.table(
        {
            "messages": [json.dumps(conversation({"type": "image"})["messages"])],
            "images": pa.array([[{"bytes": big, "path": None}]], pa.list_(image)),
        }
    )
    path = tmp_path / "inflates.parquet"
    pq.write_table(table, path, compression="zstd", write_page_index=True)
    assert path.stat().st_size < 100_000
    errors = first_error(path, max_object_bytes=32 << 20, max_pixels=100_000)
    (error,) = errors
    assert error["stage"] == "image", error
    assert "its pages decode to more than max_object_bytes (33554432 bytes" in error["reason"], error


# ---- audio_start past any clip ------------------------------------------------------------------


@pytest.mark.parametrize("start", [1e15, 1e18, 1e300])
def test_issue48_audio_start_past_any_clip_is_past_the_clips_end(omni, start):
    # Overflowing the sample offset loaded the whole clip instead.
    with pytest.raises(ValueError, match=r"audio_start is past the clip's end \(1 s\)"):
        mmfeed.load_audio(omni / "short.flac", start=start)
