"""Issue 15, the loader's part: what a hostile or careless user hands the Loader is refused by
name, before memory is committed, and never aborts, hangs or loses a sample in silence."""

import gzip
import json
import math
import re
import subprocess
import sys
import zlib

import datagen
import pytest
from conftest import ROOT

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
MAX_PIXELS = 100_000


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("hostile-data")
    datagen.generate(out, samples=12, seed=15, max_megapixels=0.3, workers=2)
    return out / "manifest.jsonl"


def load(manifest, state=None, **options):
    options.setdefault("tensors", "np")
    options.setdefault("tokenizer", TOKENIZER)
    options.setdefault("max_pixels", MAX_PIXELS)
    options.setdefault("batch_size", 4)
    loader = mmfeed.Loader(manifest, **options)
    if state is not None:
        loader.load_state_dict(state)
    with loader:
        batches = list(loader)
        return [sid for b in batches for sid in b["sample_ids"]], loader.errors(), loader.state_dict()


def first_batch(manifest, **options):
    options.setdefault("tokenizer", TOKENIZER)
    with mmfeed.Loader(manifest, tensors="np", **options) as loader:
        return next(loader)


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("fetch_inflight", 0, "LoaderConfig.fetch_inflight: must be 1 to 4096, not 0"),
        ("workers", 100_000, "LoaderConfig.workers: must be 1 to 1024, or 0 (auto), not 100000"),
        ("workers", -1, "LoaderConfig.workers: must be 1 to 1024, or 0 (auto), not -1"),
        ("prefetch_batches", 1025, "LoaderConfig.prefetch_batches: must be 1 to 1024, or 0 (auto), not 1025"),
        ("max_error_fraction", math.nan, "LoaderConfig.max_error_fraction: must be a fraction from 0 to 1"),
        ("max_error_fraction", -1.0, "LoaderConfig.max_error_fraction: must be a fraction from 0 to 1"),
        ("max_images_per_sample", 0, "LoaderConfig.max_images_per_sample: must be positive"),
        ("end_position", 6, "LoaderConfig.end_position: must be a multiple of batch_size (8), not 6"),
    ],
)
def test_out_of_range_options_are_refused_by_name(dataset, option, value, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        first_batch(dataset, **{option: value})


@pytest.mark.parametrize("option", ["min_pixels", "max_pixels"])
def test_pixel_limits_must_be_positive(dataset, option):
    for value in (0, -5):  # as transformers refuses them; None (unset) is the model's
        with pytest.raises(ValueError, match=f"{option} must be positive, not {value}"):
            mmfeed.Loader(dataset, tokenizer=TOKENIZER, **{option: value})


THREADS_SCRIPT = """
import resource, sys, mmfeed
# Room for the interpreter and a few threads, not for 1,024 thread stacks of 2-8 MiB.
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
used = int(open("/proc/self/statm").read().split()[0]) * resource.getpagesize()
resource.setrlimit(resource.RLIMIT_AS, (used + (1 << 30), hard))
try:
    with mmfeed.Loader(sys.argv[1], tokenizer=sys.argv[2], workers=1024, tensors="np") as loader:
        next(loader)
    print("opened")
except ValueError as e:
    print("refused:", e)
"""


def test_threads_the_system_refuses_are_an_error_not_an_abort(dataset):
    # 1,024 workers are allowed, but the address space given (1 GiB more than the interpreter
    # uses) holds fewer thread stacks (8 MiB each by default, 2 MiB at the least): the
    # loader must say so (and stop the threads it started) instead of terminating the process.
    run = subprocess.run(
        [sys.executable, "-c", THREADS_SCRIPT, dataset, TOKENIZER], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "refused: LoaderConfig.workers: cannot start 1024 worker threads" in run.stdout, run.stdout


def test_every_sample_failing_is_an_error_at_any_size(dataset, tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"s{i}",
                    "messages": [
                        {"role": "user", "content": [{"type": "image", "image": f"missing-{i}.jpg"}]},
                        {"role": "assistant", "content": "x"},
                    ],
                }
            )
            + "\n"
            for i in range(5)
        )
    )
    with pytest.raises(ValueError, match=r"every sample failed \(5 of 5\); last: s\d: fetch: "):
        load(broken)
    with pytest.raises(ValueError, match=r"every sample failed \(5 of 5\)"):
        load(broken, mode="serial")


def test_the_error_budget_is_checked_at_the_end_of_a_small_run(dataset, tmp_path):
    lines = dataset.read_text().splitlines()
    manifest = dataset.parent / "mostly-broken.jsonl"
    manifest.write_text("\n".join(lines[:2] + ["{not json"] * 3) + "\n")  # 3 of 5 fail: 60% > 50%
    with pytest.raises(ValueError, match=r"3 of 5 samples failed, more than the error budget \(0\.5"):
        load(manifest)
    ids, errors, _ = load(manifest, max_error_fraction=0.6)
    assert len(ids) == 2 and len(errors) == 3


def test_cli_run_fails_when_every_sample_fails(cli, tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n" * 3)
    run = subprocess.run([cli, "run", broken, "--tokenizer", TOKENIZER], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "every sample failed (3 of 3)" in run.stderr


def test_a_sample_naming_too_many_images_is_refused_before_fetching(dataset, tmp_path):
    lines = dataset.read_text().splitlines()
    image = next(
        c["image"]
        for m in json.loads(lines[0])["messages"]
        if isinstance(m["content"], list)
        for c in m["content"]
        if c["type"] == "image"
    )
    manifest = dataset.parent / "many-images.jsonl"
    manifest.write_text(
        "\n".join(
            lines
            + [
                json.dumps(
                    {
                        "id": "greedy",
                        "messages": [
                            {
                                "role": "user",
                                "content": [{"type": "image", "image": image}] * 1500 + [{"type": "text", "text": "?"}],
                            },
                            {"role": "assistant", "content": "x"},
                        ],
                    }
                )
            ]
        )
        + "\n"
    )
    ids, errors, _ = load(manifest)
    assert len(ids) == len(lines)
    assert errors == [
        {
            "sample_id": "greedy",
            "stage": "manifest",
            "reason": "sample names 1500 images, more than max_images_per_sample (256)",
            "code": "resource_exhausted",
        }
    ]
    with mmfeed.Loader(manifest, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, tensors="np") as loader:
        list(loader)
        assert loader.metrics()["counters"].get("fetch.requests", 0) <= len(lines) * 4  # its images never fetched


def test_a_sample_larger_than_the_byte_budget_is_refused_by_name(dataset):
    # Under a budget of 100 kB no sample's pixel rows fit (each image here is tens of thousands of
    # pixels, 24 bytes each as float rows): every one is refused, planned from its headers.
    with mmfeed.Loader(
        dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, max_buffered_bytes=100_000, tensors="np"
    ) as loader:
        with pytest.raises(ValueError, match="every sample failed"):
            next(loader)
        errors = loader.errors()
    assert len(errors) == 12
    # An image file itself larger than the budget is refused as it is fetched; the others by their
    # pixel rows, from their headers.
    assert all(
        e["stage"] == "image"
        and "bytes of pixel rows, more than max_buffered_bytes (100000)" in e["reason"]
        or e["stage"] == "fetch"
        and "limit of 100000 bytes (raise max_buffered_bytes, --max-buffered-bytes)" in e["reason"]
        for e in errors
    ), errors
    assert any(e["stage"] == "image" for e in errors)


def test_a_manifest_that_inflates_past_its_limit_is_refused(dataset, tmp_path):
    bomb = dataset.parent / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(dataset.read_bytes() + b"\n" * 5_000_000))
    with pytest.raises(ValueError, match=r"manifest decompresses to more than max_manifest_bytes \(1000000 bytes\)"):
        first_batch(bomb, max_manifest_bytes=1_000_000)
    plain = tmp_path / "plain.jsonl"
    plain.write_bytes(dataset.read_bytes() + b" " * 2_000_000)
    with pytest.raises(ValueError, match=r"1000000"):
        first_batch(plain, max_manifest_bytes=1_000_000)
    # Under the limit, blank lines cost nothing but their bytes.
    ids, errors, _ = load(bomb, max_pixels=MAX_PIXELS)
    assert len(ids) == 12 and not errors


def gzip_member_with_comment(size: int, path) -> None:
    """Appends to `path` an empty gzip member whose header carries a comment of `size` bytes:
    an input over 4 GiB that inflates to nothing."""
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = deflate.compress(b"") + deflate.flush()
    with open(path, "ab") as f:
        f.write(b"\x1f\x8b\x08\x10\x00\x00\x00\x00\x00\xff")  # FCOMMENT
        chunk = b"c" * (64 << 20)
        left = size
        while left > 0:
            f.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
        f.write(b"\x00" + body + b"\x00" * 8)  # CRC-32 and size of no data


@pytest.mark.heavy  # the 4 GiB manifest is read whole: 5 GB
def test_a_gzip_manifest_over_4_gib_is_read_whole(dataset, tmp_path):
    # zlib counts input in 32 bits: the members after the first 4 GiB were silently dropped.
    lines = dataset.read_text().splitlines(keepends=True)
    manifest = dataset.parent / "huge.jsonl.gz"
    try:
        manifest.write_bytes(gzip.compress("".join(lines[:6]).encode()))
        gzip_member_with_comment((1 << 32) + 1000, manifest)
        with open(manifest, "ab") as f:
            f.write(gzip.compress("".join(lines[6:]).encode()))
        assert manifest.stat().st_size > 1 << 32
        ids, errors, _ = load(manifest, max_manifest_bytes=5 << 30)
    finally:
        manifest.unlink(missing_ok=True)
    assert not errors and len(ids) == 12


@pytest.fixture(scope="module")
def taken(dataset):
    """A state taken after one batch of a two-epoch run."""
    with mmfeed.Loader(
        dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, batch_size=4, epochs=2, seed=3, tensors="np"
    ) as loader:
        next(loader)
        return loader.state_dict()


def test_the_resume_state_carries_a_fingerprint_of_its_run(dataset, taken):
    fingerprint = taken["fingerprint"]
    assert fingerprint["samples"] == "12" and fingerprint["seed"] == "3" and fingerprint["shuffle"] == "true"
    assert fingerprint["manifest 0"].startswith(f"{dataset} (") and "12 samples, crc32 " in fingerprint["manifest 0"]
    ids, errors, _ = load(dataset, taken, epochs=2, seed=3)  # the same run resumes
    assert len(ids) == 2 * 12 - 4 and not errors


def test_a_resume_state_of_another_run_is_refused_saying_what_differs(dataset, taken, tmp_path):
    grown = tmp_path / "manifest.jsonl"
    lines = dataset.read_text().splitlines()
    grown.write_text("\n".join(lines + lines[:2]) + "\n")
    state = dict(
        taken,
        fingerprint={
            **taken["fingerprint"],
            "manifest 0": taken["fingerprint"]["manifest 0"].replace(str(dataset), str(grown)),
        },
    )
    with pytest.raises(
        ValueError,
        match=r"resume state: the resume state was taken over another run: manifest 0 was "
        r".* 12 samples, .*now .* 14 samples.*; samples was 12, now 14",
    ):
        load(grown, state, epochs=2, seed=3, max_pixels=MAX_PIXELS)
    with pytest.raises(ValueError, match="shuffle was true, now false"):
        load(dataset, taken, epochs=2, seed=3, shuffle=False)
    with pytest.raises(ValueError, match="batch_size was 4, now 3"):
        load(dataset, taken, epochs=2, seed=3, batch_size=3)


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("epoch", -1, "loader state: epoch -1 is outside 0..2147483647"),
        ("epoch", 2, "the resume state is in epoch 2, past this run's 2 epochs"),
        ("position", 10**18, "the resume state is at position 1000000000000000000 of epoch 0, which has 12 samples"),
        ("position", -5, "loader state: position -5 is outside 0..18446744073709551615"),
        ("position", 2**64, "loader state is not valid JSON: .*a number outside 0..2\\^64-1"),
        ("position", 1.5, "loader state: position must be an integer"),
        ("seed", "3", "loader state: seed must be an integer"),
    ],
)
def test_out_of_range_resume_fields_are_refused(dataset, taken, field, value, message):
    with pytest.raises(ValueError, match=message):
        load(dataset, dict(taken, **{field: value}), epochs=2, seed=3)


def test_a_hand_made_state_without_fingerprint_is_still_range_checked(dataset):
    ids, _, _ = load(dataset, {"seed": 0, "rank": 0, "world_size": 1, "epoch": 0, "position": 8})
    assert len(ids) == 4
    with pytest.raises(ValueError, match="which has 12 samples"):
        load(dataset, {"seed": 0, "rank": 0, "world_size": 1, "epoch": 0, "position": 13})


def test_close_from_another_thread_is_not_the_end_of_the_data(dataset):
    import threading

    # A consumer draining a run of 1,000 epochs on one thread, close() from another: the consumer
    # must learn that the loader was closed, not meet an end of data that was never reached.
    with mmfeed.Loader(
        dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, batch_size=1, epochs=1000, tensors="np"
    ) as loader:
        next(loader)
        errors = []

        def drain():
            try:
                while next(loader, None) is not None:
                    pass
                errors.append("ended without an error")
            except ValueError as e:
                errors.append(str(e))

        t = threading.Thread(target=drain)
        t.start()
        t.join(1.0)  # let it run: whatever it has taken by then, the data is far from its end
        loader.close()
        t.join(60)
        assert not t.is_alive()
    assert errors and "the loader was closed (close() was called) before the end of its data" in errors[0], errors
    with pytest.raises(ValueError, match="the loader was closed"):  # and on this thread, afterwards
        next(loader)
    with mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, tensors="np") as complete:
        list(complete)
    assert list(complete) == []  # closed after the end of the data: the end, as before


def test_an_unparsable_sample_with_an_id_is_reported_by_its_id(dataset):
    manifest = dataset.parent / "bad-content.jsonl"
    manifest.write_text(json.dumps({"id": "object-messages", "messages": {}}) + "\n" + dataset.read_text())
    ids, errors, _ = load(manifest)
    assert len(ids) == 12
    assert [e["sample_id"] for e in errors] == ["object-messages"]
    assert errors[0]["reason"].endswith(f"({manifest}:1)")


@pytest.mark.parametrize("mode", ["concurrent", "serial"])
def test_duplicate_sample_ids_are_counted(dataset, mode):
    lines = dataset.read_text().splitlines()
    manifest = dataset.parent / "duplicates.jsonl"
    manifest.write_text("\n".join(lines + lines[:3]) + "\n")  # three ids twice
    with mmfeed.Loader(
        manifest, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, epochs=2, mode=mode, tensors="np"
    ) as loader:
        assert len([sid for b in loader for sid in b["sample_ids"]]) == 2 * 15
        assert loader.metrics()["counters"]["loader.duplicate_sample_ids"] == 3  # the first epoch's
    with mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, tensors="np") as loader:
        list(loader)
        assert loader.metrics()["counters"]["loader.duplicate_sample_ids"] == 0


BODY_SCRIPT = """
import sys, mmfeed
with mmfeed.Loader(sys.argv[1], tokenizer=sys.argv[2], max_pixels=100_000, batch_size=4, tensors="np",
                   max_buffered_bytes=int(sys.argv[3])) as loader:
    ids = [sid for b in loader for sid in b["sample_ids"]]
    print(len(ids), *[e["reason"] for e in loader.errors()], sep="\\n")
"""


def run_measured(*args):
    """Runs BODY_SCRIPT; its output lines and its own peak RSS in bytes."""
    import os

    proc = subprocess.Popen([sys.executable, "-c", BODY_SCRIPT, *map(str, args)], stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    assert proc.returncode == 0, out
    return out.splitlines(), usage.ru_maxrss * 1024


def test_a_body_being_fetched_counts_against_the_byte_budget(dataset, nginx):
    # An endless body without a length was buffered whole (4 GiB: 4.4 GB RSS under a 100 MB
    # budget). What is being fetched counts against the budget: the object is refused once it
    # outgrows it, and peak memory stays within the control (the same samples without it) plus
    # three budgets: the refused body's buffer at the limit and the half-size one it was copied
    # from (1.5), and room for how many samples happen to be in flight (1.5). Unbounded, the
    # endless body alone would take gigabytes.
    budget = 50_000_000
    control = dataset.parent / "control.jsonl"
    control.write_text(dataset.read_text())
    endless = dataset.parent / "endless.jsonl"
    endless.write_text(
        dataset.read_text()
        + json.dumps(
            {
                "id": "endless",
                "messages": [
                    {"role": "user", "content": [{"type": "image", "image": nginx.url("huge", "chunked")}]},
                    {"role": "assistant", "content": "x"},
                ],
            }
        )
        + "\n"
    )
    (count, *reasons), peak = run_measured(endless, TOKENIZER, budget)
    (control_count,), control_peak = run_measured(control, TOKENIZER, budget)
    assert int(count) == int(control_count) == 12
    assert len(reasons) == 1 and f"exceeds the object size limit of {budget} bytes" in reasons[0], reasons
    assert "(raise max_buffered_bytes, --max-buffered-bytes)" in reasons[0] and "max_object_bytes" not in reasons[0]
    assert peak < control_peak + 3 * budget, (peak, control_peak)


def test_a_tokenizer_path_that_is_a_fifo_is_refused_not_waited_on(dataset, tmp_path):
    import os

    fifo = tmp_path / "tokenizer.json"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="tokenizer file is not a regular file"):
        first_batch(dataset, tokenizer=fifo, max_pixels=MAX_PIXELS)


def test_a_failing_sample_keeps_its_error_code_under_on_error_fail(dataset, tmp_path):
    # Issue 17: on_error="fail" re-raised every failure as corrupt data (a 403 became corrupt_data).
    lines = dataset.read_text().splitlines()
    manifest = dataset.parent / "missing.jsonl"
    manifest.write_text(
        json.dumps(
            {
                "id": "gone",
                "messages": [
                    {"role": "user", "content": [{"type": "image", "image": "images/nope.png"}]},
                    {"role": "assistant", "content": "x"},
                ],
            }
        )
        + "\n"
        + "\n".join(lines)
        + "\n"
    )
    ids, errors, _ = load(manifest, shuffle=False)
    assert [(e["sample_id"], e["stage"], e["code"]) for e in errors] == [("gone", "fetch", "not_found")]
    with pytest.raises(ValueError, match=r"^sample gone: fetch: .*cannot open: No such file"):
        load(manifest, shuffle=False, on_error="fail")


# Issue 31, round 3: what the loader promises once a run failed or could not be recorded.


@pytest.mark.parametrize("mode", ["concurrent", "serial"])
def test_a_run_over_its_error_budget_stays_failed(dataset, mode):
    # The serial mode raised once and then went on consuming the epoch behind the error (issue 31).
    lines = dataset.read_text().splitlines()
    manifest = dataset.parent / f"failing-{mode}.jsonl"
    manifest.write_text(
        json.dumps(
            {
                "id": "gone",
                "messages": [
                    {"role": "user", "content": [{"type": "image", "image": "images/nope.png"}]},
                    {"role": "assistant", "content": "x"},
                ],
            }
        )
        + "\n"
        + "\n".join(lines)
        + "\n"
    )
    with mmfeed.Loader(
        manifest,
        tokenizer=TOKENIZER,
        max_pixels=MAX_PIXELS,
        batch_size=4,
        shuffle=False,
        on_error="fail",
        mode=mode,
        tensors="np",
    ) as loader:
        for _ in range(3):
            with pytest.raises(ValueError, match=r"^sample gone: fetch: "):
                next(loader)
        assert loader.state_dict()["position"] == 0  # nothing delivered, nothing consumed behind it


@pytest.mark.parametrize(
    "path, reason", [("missing-folder/trace.json", "No such file or directory"), (".", "Is a directory")]
)
def test_a_trace_that_cannot_be_written_is_refused_at_open(dataset, tmp_path, path, reason):
    with pytest.raises(ValueError, match=rf"^LoaderConfig.trace_path: .*{path}: cannot write the trace: {reason}"):
        first_batch(dataset, max_pixels=MAX_PIXELS, trace_path=tmp_path / path)


def test_a_trace_lost_at_close_is_an_error(dataset):
    loader = mmfeed.Loader(dataset, tokenizer=TOKENIZER, max_pixels=MAX_PIXELS, trace_path="/dev/full", tensors="np")
    next(loader)
    for _ in range(2):  # and again: the status of the one close that wrote it
        with pytest.raises(OSError, match="/dev/full: the trace file was not written whole: No space left on device"):
            loader.close()


def test_cli_run_fails_when_its_trace_or_report_is_lost(cli, dataset, tmp_path):
    base = [cli, "run", dataset, "--tokenizer", TOKENIZER, "--max-pixels", str(MAX_PIXELS)]
    run = subprocess.run(
        base + ["--trace", tmp_path / "no-such-folder" / "t.json"], capture_output=True, text=True, timeout=120
    )
    assert run.returncode != 0 and "cannot write the trace: No such file or directory" in run.stderr
    assert "trace written" not in run.stdout
    run = subprocess.run(base + ["--trace", "/dev/full"], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "No space left on device" in run.stderr and "trace written" not in run.stdout
    with open("/dev/full", "w") as full:
        run = subprocess.run(base + ["--json"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=120)
    assert run.returncode != 0 and "could not write standard output: No space left on device" in run.stderr
    ok = subprocess.run(base + ["--trace", tmp_path / "t.json"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and "trace written" in ok.stdout and json.loads((tmp_path / "t.json").read_text())


LEFT_AT_EXIT_SCRIPT = """
import sys, threading, time, mmfeed
def monitor():  # as tqdm's monitor thread or a logger's: Python code in a daemon thread
    while True:
        time.sleep(0.05)
threading.Thread(target=monitor, daemon=True).start()
loader = mmfeed.Loader(sys.argv[1], tokenizer=sys.argv[2], max_pixels=100_000, batch_size=2, tensors="np",
                       trace_path=sys.argv[3])
batch = next(loader)
tokenizer = mmfeed.Tokenizer.from_file(sys.argv[2])
processor = mmfeed.ImageProcessor("qwen2-vl")
inputs = mmfeed.LoaderInputs(sys.argv[1], tokenizer=sys.argv[2])
print("exiting")
"""


def test_engine_objects_left_at_exit_beside_a_daemon_thread_are_not_leaked(dataset, tmp_path):
    # nanobind found them alive at teardown and printed "leaked 1 instances! ... leaked 6 functions!".
    trace = tmp_path / "trace.json"
    run = subprocess.run(
        [sys.executable, "-c", LEFT_AT_EXIT_SCRIPT, dataset, TOKENIZER, trace],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0 and run.stdout == "exiting\n", run.stderr[-2000:]
    assert "leaked" not in run.stderr, run.stderr[-2000:]
    assert json.loads(trace.read_text())["traceEvents"]  # closed at exit: its trace written


def test_a_number_out_of_double_range_names_its_sample_by_id(dataset):
    manifest = dataset.parent / "huge-number.jsonl"
    manifest.write_text('{"id": "s1", "weight": 1e999, "messages": []}\n' + dataset.read_text())
    ids, errors, _ = load(manifest)
    assert len(ids) == 12
    assert [(e["sample_id"], e["stage"]) for e in errors] == [("s1", "manifest")], errors
    assert errors[0]["reason"].endswith(f"({manifest}:1)"), errors
