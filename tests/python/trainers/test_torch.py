"""PyTorch integration (torch 2.13.0 CPU): zero-copy tensors, the IterableDataset with
DataLoader, state_dict through torch.save, disjoint shards for two gloo processes, fork
refusal, the Megatron-shaped adapter, the example training loop, and what device= refuses (the
copy stage itself runs against the test CUDA runtime in test_cuda_path.py, and on a GPU in
bench/gpu/run.sh)."""

import ctypes.util
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import datagen
import pytest
import torch
from conftest import ROOT
from torch.utils.data import DataLoader

import mmfeed
import mmfeed.megatron
import mmfeed.torch

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = dict(tokenizer=TOKENIZER, max_pixels=100_000, batch_size=4)


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    out = tmp_path_factory.mktemp("torch-data")
    datagen.generate(out, samples=17, seed=12, max_megapixels=0.5, workers=2)
    return out / "manifest.jsonl"


def test_torch_tensors_share_the_engine_buffer(manifest):
    with mmfeed.Loader(manifest, tensors="torch", **OPTIONS) as loader:
        batch = next(loader)
    assert isinstance(batch["input_ids"], torch.Tensor) and batch["input_ids"].dtype == torch.int64
    assert batch["input_ids"].data_ptr() == batch["buffer_address"]
    assert batch["pixel_values"].dtype == torch.float32
    kept = batch["labels"].clone()
    torch.testing.assert_close(batch["labels"], kept)  # valid after close


def test_dataset_with_dataloader_and_state_dict_through_torch_save(manifest, tmp_path):
    dataset = mmfeed.torch.Dataset(manifest, seed=3, **OPTIONS)
    loader = DataLoader(dataset, batch_size=None, num_workers=0)
    it = iter(loader)
    first = [next(it) for _ in range(2)]
    path = tmp_path / "state.pt"
    torch.save(dataset.state_dict(), path)
    dataset.close()
    full = [b["sample_ids"] for b in DataLoader(mmfeed.torch.Dataset(manifest, seed=3, **OPTIONS), batch_size=None)]
    resumed = mmfeed.torch.Dataset(manifest, seed=3, **OPTIONS)
    resumed.load_state_dict(torch.load(path))
    rest = [b["sample_ids"] for b in DataLoader(resumed, batch_size=None)]
    assert [b["sample_ids"] for b in first] + rest == full


def _ids(batches) -> list[str]:
    return [i for b in batches for i in b["sample_ids"]]


def test_dataset_passes_follow_the_run(manifest):
    with mmfeed.Loader(manifest, seed=4, epochs=3, **OPTIONS) as loader:
        epochs = [[], [], []]
        for b in loader:
            epochs[b["epoch"]] += list(b["sample_ids"])
    dataset = mmfeed.torch.Dataset(manifest, seed=4, **OPTIONS)
    loader = DataLoader(dataset, batch_size=None)
    assert _ids(loader) == epochs[0]  # each pass is the next epoch, in its own order
    assert dataset.state_dict()["epoch"] == 1
    left_early = []
    for b in loader:
        left_early += b["sample_ids"]
        break
    assert left_early + _ids(loader) == epochs[1]  # a pass left early is completed by the next
    assert _ids(loader) == epochs[2]
    dataset.set_epoch(1)
    assert _ids(loader) == epochs[1]
    dataset.close()
    # Two epochs a pass: the pass runs both; the state loaded is the state reported.
    double = mmfeed.torch.Dataset(manifest, seed=4, epochs=2, **OPTIONS)
    assert _ids(DataLoader(double, batch_size=None)) == epochs[0] + epochs[1]
    state = {**double.state_dict()}
    assert state["epoch"] == 2 and state["pass_end_epoch"] == 4
    double.load_state_dict({**state, "epoch": 0, "pass_end_epoch": 1})
    assert double.state_dict() == {**state, "epoch": 0, "pass_end_epoch": 1}
    assert _ids(DataLoader(double, batch_size=None)) == epochs[0]


def test_loader_edges_before_and_after_iterating(manifest):
    loader = mmfeed.Loader(manifest, seed=4, **OPTIONS)
    assert loader.errors() == [] and loader.metrics() == {}  # asking does not open the engine
    fresh = loader.state_dict()
    assert fresh == {}
    loader.load_state_dict(fresh)  # a state taken before iterating starts from the beginning
    with mmfeed.Loader(manifest, seed=4, **OPTIONS) as plain:
        assert _ids(loader) == _ids(plain)
    unopened = mmfeed.Loader(manifest, **OPTIONS)
    unopened.close()
    assert list(unopened) == []  # closed before it opened: nothing, not a fresh engine


def test_loader_opens_one_engine_for_concurrent_callers(manifest):
    # The engine opens on first use with the GIL released; callers racing for it must share one.
    import threading

    for _ in range(3):
        loader = mmfeed.Loader(manifest, seed=5, epochs=2, tensors="np", **OPTIONS)
        seen, lock = [], threading.Lock()

        def take():
            for b in loader:
                with lock:
                    seen.extend(b["sample_ids"])

        threads = [threading.Thread(target=take) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        loader.close()
        assert sorted(seen) == sorted(_ids_of_manifest(manifest) * 2)


def _ids_of_manifest(manifest) -> list[str]:
    return [json.loads(line)["id"] for line in manifest.read_text().splitlines() if line.strip()]


def test_dataset_refuses_worker_processes(manifest):
    with pytest.raises(RuntimeError, match="num_workers=0"):
        next(iter(DataLoader(mmfeed.torch.Dataset(manifest, **OPTIONS), batch_size=None, num_workers=1)))


def test_engine_errors_surface_with_the_sample(manifest, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps(
            {"id": "lonely", "messages": [{"role": "user", "content": [{"type": "image", "image": "missing.png"}]}]}
        )
        + "\n"
    )
    with pytest.raises(ValueError, match="sample lonely: fetch: .*missing.png: cannot open"):
        next(iter(mmfeed.torch.Dataset(bad, on_error="fail", **OPTIONS)))


def test_forked_child_is_refused_clearly(manifest):
    loader = mmfeed.Loader(manifest, **OPTIONS)
    next(loader)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(read)
        try:
            next(loader)
            message = b"no error"
        except RuntimeError as err:
            message = str(err).encode()
        os.write(write, message)
        os._exit(0)
    os.close(write)
    message = os.read(read, 4096).decode()
    os.waitpid(pid, 0)
    loader.close()
    assert "cannot be used in the forked process" in message


def test_a_forked_child_can_free_what_it_inherited(manifest):
    # A child's garbage collector may free a running Loader and live batches copied from the
    # parent (a multiprocessing pool started later, say): that must neither crash nor hang.
    loader = mmfeed.Loader(manifest, **OPTIONS)
    batch = next(loader)
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            del loader, batch
            gc.collect()
            code = 0
        finally:
            os._exit(code)
    for _ in range(400):
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail("the child hung freeing the inherited loader")
    loader.close()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert batch["input_ids"].shape[0] == 4


DIST_SCRIPT = """
import datetime, json, sys, torch.distributed as dist
import mmfeed.torch
dist.init_process_group("gloo", init_method=sys.argv[1], rank=int(sys.argv[2]), world_size=2, timeout=datetime.timedelta(seconds=300))
ds = mmfeed.torch.Dataset(sys.argv[3], tokenizer=sys.argv[4], max_pixels=100000, batch_size=4)
print(json.dumps([sid for b in ds for sid in b["sample_ids"]]))
dist.destroy_process_group()
"""


@pytest.mark.heavy  # two ranks
def test_two_gloo_processes_see_equal_shards_that_cover_the_data(manifest, tmp_path):
    init = f"file://{tmp_path / 'rendezvous'}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", DIST_SCRIPT, init, str(rank), str(manifest), str(TOKENIZER)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    shards = [json.loads(p.communicate(timeout=300)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    ids = [json.loads(line)["id"] for line in manifest.read_text().splitlines()]
    # 17 samples over 2 ranks: 9 each (padded, the default), one sample on both.
    assert len(shards[0]) == len(shards[1]) == 9
    assert len(set(shards[0]) & set(shards[1])) == 1
    assert set(shards[0] + shards[1]) == set(ids)


def test_megatron_iterators(manifest):
    train, valid, test = mmfeed.megatron.build_train_valid_test_data_iterators(
        manifest, manifest, None, train_epochs=3, **OPTIONS
    )
    assert test is None
    seen = [next(train)["sample_ids"] for _ in range(12)]  # more batches than one epoch holds
    assert len(seen) == 12
    first_valid = next(valid)["sample_ids"]
    for _ in range(4):
        next(valid)
    assert next(valid)["sample_ids"] == first_valid  # cyclic: 17 samples = 5 batches of 4
    state = mmfeed.megatron.state_dict(train)
    assert state["position"] > 0
    train.close()
    valid.close()
    # The train split's epochs and shuffle do not reach validation, which stays one fixed pass.
    train, valid, _ = mmfeed.megatron.build_train_valid_test_data_iterators(
        manifest, manifest, None, epochs=2, shuffle=False, **OPTIONS
    )
    assert [next(train)["epoch"] for _ in range(10)][-1] == 1  # 17 samples: 5 batches an epoch
    with pytest.raises(StopIteration):
        next(train)
    assert _ids([next(valid) for _ in range(5)]) == _ids_of_manifest(manifest)
    valid.close()


INTERRUPT_SCRIPT = """
import signal, sys, threading, time, os
# Ctrl-C delivered and handled as in a user's process, whatever this one inherited: in the full
# suite an earlier test leaves the pytest process so that its children start with SIGINT ignored
# or blocked (the signal mask survives exec), and no KeyboardInterrupt came.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
signal.signal(signal.SIGINT, signal.default_int_handler)
import mmfeed
# A manifest whose only image sits behind a server that never answers: next() waits.
with mmfeed.Loader(sys.argv[1], tokenizer=sys.argv[2], batch_size=1) as loader:
    threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    start = time.monotonic()
    try:
        next(loader)
        print("no interrupt")
    except KeyboardInterrupt:
        print(f"interrupted after {time.monotonic() - start:.1f} s")
"""


def test_ctrl_c_interrupts_a_waiting_next(tmp_path):
    import socket

    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(1)  # accepts connections, never answers
    port = silent.getsockname()[1]
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        json.dumps(
            {
                "id": "x",
                "messages": [
                    {"role": "user", "content": [{"type": "image", "image": f"http://127.0.0.1:{port}/never.jpg"}]}
                ],
            }
        )
        + "\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", INTERRUPT_SCRIPT, str(manifest), str(TOKENIZER)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    silent.close()
    assert "interrupted after" in run.stdout, run.stdout + run.stderr


def test_a_thousand_batches_with_flat_memory(tmp_path):
    manifest = tmp_path / "text.jsonl"
    manifest.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"t{i}",
                    "messages": [
                        {"role": "user", "content": f"question {i} " * (i % 7 + 1)},
                        {"role": "assistant", "content": "answer " * (i % 5 + 1)},
                    ],
                }
            )
            + "\n"
            for i in range(4000)
        )
    )
    script = """
import sys, mmfeed
def rss():
    return int(next(l for l in open('/proc/self/status') if l.startswith('VmRSS')).split()[1]) * 1024
with mmfeed.Loader(sys.argv[1], tokenizer=sys.argv[2], batch_size=4, tensors="torch") as loader:
    marks = []
    for i, batch in enumerate(loader):
        if i in (100, 999):
            marks.append(rss())
print(i + 1, marks[1] - marks[0])
"""
    run = subprocess.run(
        [sys.executable, "-c", script, str(manifest), str(TOKENIZER)],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    batches, growth = map(int, run.stdout.split())
    assert batches == 1000
    assert growth < 16_000_000, growth  # warm pool: no growth beyond allocator noise


def test_batch_memory_falls_back_to_pageable_without_a_gpu(manifest):
    described = mmfeed.cuda_runtime()
    assert described.endswith(("pinned batch memory", "pageable memory"))
    with mmfeed.Loader(manifest, **OPTIONS) as loader:
        batch = next(loader)
        assert loader.metrics()["batch_memory"] == described
    assert batch["input_ids"].shape[0] == 4
    with mmfeed.Loader(manifest, pin_memory=False, **OPTIONS) as loader:
        next(loader)
        assert loader.metrics()["batch_memory"] == "pageable (pin_memory off)"


def _runtime_described(env=None, preload=None):
    """mmfeed.cuda_runtime() in a fresh process (the runtime is looked up once per process)."""
    code = "import ctypes, sys; sys.argv[1] and ctypes.CDLL(sys.argv[1]); import mmfeed; print(mmfeed.cuda_runtime())"
    return subprocess.run(
        [sys.executable, "-c", code, str(preload or "")],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_cuda_runtime_lookup_says_what_it_found(tmp_path):
    assert (
        _runtime_described({"MMFEED_CUDART": str(tmp_path / "absent.so")})
        == "no CUDA runtime (libcudart not found): pageable memory"
    )
    assert "lacks cudaGetDeviceCount" in _runtime_described({"MMFEED_CUDART": "libz.so.1"})
    toolkit = ctypes.util.find_library("cudart")
    if toolkit is None:
        pytest.skip("no libcudart on this machine to check the lookup of a real runtime")
    # A runtime already in the process (torch's, when torch is imported first) is the one used:
    # a copy of the toolkit's loaded before mmfeed looks.
    real = Path(
        subprocess.run(
            [
                sys.executable,
                "-c",
                f"import ctypes; ctypes.CDLL({toolkit!r}); "
                "print(next(l.split()[-1] for l in open('/proc/self/maps') if 'cudart' in l))",
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    copy = tmp_path / real.name
    copy.write_bytes(real.read_bytes())
    described = _runtime_described(preload=copy)
    assert f"CUDA runtime {copy} " in described or f"({copy})" in described, described
    alone = _runtime_described()
    assert str(copy) not in alone and "libcudart" in alone, alone


def test_pin_device_is_checked(manifest):
    with pytest.raises(ValueError, match="LoaderConfig.pin_device: must be a device index, or -1 to choose"):
        next(mmfeed.Loader(manifest, pin_device=-2, tensors="np", **OPTIONS))
    if not mmfeed.cuda_runtime().endswith("pinned batch memory"):
        # Without a usable runtime the device does not matter: batches are pageable either way.
        with mmfeed.Loader(manifest, pin_device=7, tensors="np", **OPTIONS) as loader:
            next(loader)
            assert loader.metrics()["batch_memory"] == mmfeed.cuda_runtime()


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


def _settles_to(count: int) -> bool:
    for _ in range(100):
        if _threads() <= count:
            return True
        time.sleep(0.05)
    return False


def test_a_loader_dropped_mid_run_stops_its_threads(manifest):
    with mmfeed.Loader(manifest, **OPTIONS) as warm:  # torch's own pools start here
        list(warm)
    assert _settles_to(_threads())
    baseline = _threads()
    loader = mmfeed.Loader(manifest, **OPTIONS)
    batch = next(loader)  # engine threads running, batches staged ahead
    assert _threads() > baseline
    del loader
    gc.collect()
    assert _settles_to(baseline), f"{_threads()} threads, {baseline} before the loader"
    assert batch["input_ids"].shape[0] == 4  # a batch kept stays valid


def test_device_stage_refuses_what_it_cannot_do(manifest):
    with pytest.raises(ValueError, match="device= needs tensors='torch'"):
        mmfeed.Loader(manifest, tensors="np", device="cuda:0", **OPTIONS)
    with pytest.raises(ValueError, match="batches can be put on a CUDA device"):
        mmfeed.Loader(manifest, tensors="torch", device="cpu", **OPTIONS)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no usable CUDA device"):
            mmfeed.Loader(manifest, tensors="torch", device="cuda:0", **OPTIONS)
