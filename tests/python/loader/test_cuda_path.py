"""The CUDA path on every CI run, without a GPU: each test runs a Python process against the test
CUDA runtime (tests/device/test_cudart.cc, built as build/libmmfeed_test_cudart.so and named by
MMFEED_CUDART), which backs its one device with host memory and aborts, with a message, on misuse
or on any call after its atexit teardown. The engine-level binding (_mmfeed._Loader with a device)
is used directly: this machine's torch has no CUDA, so torch cannot hold the device batches (on
a GPU, bench/gpu/run.sh runs mmfeed.Loader(device=...) itself)."""

import json
import os
import subprocess
import sys
import textwrap

import datagen
import pytest
from conftest import ROOT, copy_with_damaged_image

TEST_RUNTIME = ROOT / "build" / "libmmfeed_test_cudart.so"
TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"

PRELUDE = """
import ctypes, gc, json, os, sys, time
import numpy as np
import mmfeed
from mmfeed import _mmfeed
OPTS = json.loads(sys.argv[1])

def pull(core, device=False):
    return core.next(torch=False, stream=0) if device else core.next(torch=False)

def dlpack(capsule):
    # A device tensor comes as a DLPack capsule: ((device type, device id), data pointer) of its DLTensor.
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    tensor = get(capsule, b"dltensor")
    device = tuple((ctypes.c_int32 * 2).from_address(tensor + 8))
    return device, ctypes.c_void_p.from_address(tensor).value

def same_bytes(host, device):
    # The test runtime's device memory is host memory: read each tensor back.
    assert device["sample_ids"] == host["sample_ids"]
    for name, array in host.items():
        if isinstance(array, np.ndarray):
            where, data = dlpack(device[name])
            assert where == (2, 0), where  # kDLCUDA, device 0
            assert data - device["buffer_address"] == array.ctypes.data - host["buffer_address"], name
            assert ctypes.string_at(data, array.nbytes) == array.tobytes(), name
"""


@pytest.fixture(scope="module")
def manifest(tmp_path_factory):
    out = tmp_path_factory.mktemp("cuda-path-data")
    datagen.generate(out, samples=14, seed=21, max_megapixels=0.5, workers=2)
    return out / "manifest.jsonl"


def run(script: str, options: dict, tmp_path, **env) -> tuple[subprocess.CompletedProcess, dict]:
    """Runs PRELUDE + script with the test runtime; returns the process and the runtime's call
    counts at its teardown."""
    assert TEST_RUNTIME.is_file(), "make build builds the test CUDA runtime"
    report = tmp_path / f"runtime-{len(list(tmp_path.glob('runtime-*')))}.json"
    environment = {
        **os.environ,
        "MMFEED_CUDART": str(TEST_RUNTIME),
        "MMFEED_TEST_CUDART_REPORT": str(report),
        **{k: str(v) for k, v in env.items()},
    }
    done = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", PRELUDE + textwrap.dedent(script), json.dumps(options)],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    counts = json.loads(report.read_text()) if report.exists() else {}
    return done, counts


def options(manifest, **extra) -> dict:
    return {
        "manifests": [str(manifest)],
        "tokenizer": str(TOKENIZER),
        "max_pixels": 100_000,
        "batch_size": 3,
        "workers": 2,
        "seed": 4,
        **extra,
    }


@pytest.mark.parametrize("pixels", ["float32", "bfloat16", "uint8"])
def test_device_batches_equal_host_batches_and_only_handed_over_batches_count(manifest, tmp_path, pixels):
    done, counts = run(
        """
        host, device = _mmfeed._Loader(OPTS, None), _mmfeed._Loader({**OPTS, "cuda_device": 0}, None)
        assert json.loads(device.state()) == json.loads(host.state())
        batches = 0
        while (h := pull(host)) is not None:
            same_bytes(h, pull(device, True))
            assert device.state() == host.state()  # the batches staged ahead are not delivered
            batches += 1
        assert pull(device, True) is None
        metrics = json.loads(device.metrics())
        print(json.dumps({"batches": batches, "copy": metrics["device_copy"], "memory": metrics["batch_memory"]}))
    """,
        options(manifest, epochs=2, pixels=pixels),
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["batches"] == 10  # 14 samples in batches of 3 ("pad"), two epochs
    assert out["copy"]["copies"] == 10 and out["copy"]["pageable_copies"] == 0 and out["copy"]["trainer_wait_s"] >= 0
    assert "test_cudart" in out["memory"] and "pinned batch memory on device 0" in out["memory"]
    assert counts["cudaMemcpyAsync"] == 10 and counts.get("cudaMemcpy", 0) == 0


def test_refused_page_locking_falls_back_to_pageable_copies(manifest, tmp_path):
    # Every cudaHostAlloc refused: every batch buffer comes from the heap and is copied synchronously.
    done, counts = run(
        """
        host, device = _mmfeed._Loader(OPTS, None), _mmfeed._Loader({**OPTS, "cuda_device": 0}, None)
        while (h := pull(host)) is not None:
            same_bytes(h, pull(device, True))
        metrics = json.loads(device.metrics())
        print(json.dumps({"copy": metrics["device_copy"], "memory": metrics["batch_memory"]}))
    """,
        options(manifest),
        tmp_path,
        MMFEED_TEST_CUDART_REFUSE_HOST_ALLOC=1,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "buffers pageable: cudaHostAlloc refused them" in out["memory"]
    assert out["copy"]["copies"] == out["copy"]["pageable_copies"] == counts["cudaMemcpy"] == 5
    assert counts.get("cudaMemcpyAsync", 0) == 0


def test_the_exit_crash_sequence_exits_cleanly(manifest, tmp_path):
    # Issue 19's reproduction (../shared/repro/gpu_exit_crash.py) as far as a CPU torch goes: loaders
    # one after the other in one process, torch tensors and numpy arrays over pinned memory kept
    # in globals, a device loader left open with its batch held, and nothing freed before exit.
    done, counts = run(
        """
        import torch
        with mmfeed.Loader(tensors="torch", **OPTS) as L:
            kept = []
            for b in L:
                kept.append({k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in b.items()})
            last = b
        with mmfeed.Loader(tensors="np", **OPTS) as L:
            arrays = list(L)
        device = _mmfeed._Loader({**OPTS, "cuda_device": 0}, None)
        on_device = pull(device, True)
        assert last["input_ids"].data_ptr() and arrays[0]["input_ids"].size and on_device is not None
        print("end of script")
    """,
        options(manifest),
        tmp_path,
    )
    assert done.returncode == 0, f"exit status {done.returncode}\n{done.stderr}"
    assert done.stdout.strip() == "end of script" and "test CUDA runtime" not in done.stderr
    assert counts["cudaHostAlloc"] > 0 and counts["cudaMemcpyAsync"] > 0


def test_a_forked_child_frees_an_inherited_device_loader_and_its_batches(manifest, tmp_path):
    done, _ = run(
        """
        device = _mmfeed._Loader({**OPTS, "cuda_device": 0}, None)
        batch = pull(device, True)
        pid = os.fork()
        if pid == 0:
            del device, batch
            gc.collect()
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        device.close()
        print(json.dumps({"child": status, "after": pull(device, True) if False else "closed"}))
    """,
        options(manifest),
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["child"] == 0


def test_closing_mid_copy_stops_the_threads_and_says_so(manifest, tmp_path):
    done, counts = run(
        """
        threads = lambda: len(os.listdir("/proc/self/task"))
        before = threads()
        device = _mmfeed._Loader({**OPTS, "cuda_device": 0}, None)
        kept = pull(device, True)
        device.close()  # copies staged ahead and in flight
        try:
            pull(device, True)
            raise SystemExit("next() after close() returned")
        except ValueError as e:
            said = str(e)
        del device
        gc.collect()
        for _ in range(600):  # threads end as they see the close: up to 30 s on a slow, busy machine
            if threads() - before <= 1:
                break
            time.sleep(0.05)
        print(json.dumps({"said": said, "threads": threads() - before, "kept": len(kept["sample_ids"])}))
    """,
        options(manifest, epochs=3),
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert "closed" in out["said"] and out["kept"] == 3
    assert out["threads"] <= 1  # the pinning thread of the process-wide runtime may stay


def test_the_loaders_error_reaches_the_trainer_through_the_copy_stage(manifest, tmp_path):
    damaged, victim = copy_with_damaged_image(manifest, tmp_path / "data", 0, lambda raw: b"not an image")
    done, _ = run(
        """
        device = _mmfeed._Loader({**OPTS, "cuda_device": 0}, None)
        said = []
        for _ in range(2):  # and again: an error is not an end
            try:
                while pull(device, True) is not None:
                    pass
            except ValueError as e:
                said.append(str(e))
        print(json.dumps(said))
    """,
        options(damaged, on_error="fail", shuffle=False),
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert len(said) == 2 and said[0] == said[1] and victim["id"] in said[0]
