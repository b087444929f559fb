"""The Python peers' pipelines over the shared per-sample code (hf_sample.py): one sample after
another, PyTorch's DataLoader with worker processes, SPDL's thread pipeline."""

from __future__ import annotations

from .hf_sample import HFSample, collate


def naive_batches(ds: HFSample, batch: int):
    for start in range(0, len(ds), batch):
        yield collate([ds[i] for i in range(start, min(start + batch, len(ds)))])


def dataloader_batches(ds: HFSample, batch: int, workers: int):
    from torch.utils.data import DataLoader

    yield from DataLoader(ds, batch_size=batch, num_workers=workers, collate_fn=collate)


def spdl_batches(ds: HFSample, batch: int, workers: int):
    from spdl.pipeline import PipelineBuilder

    fetches = 32  # I/O: GETs in flight, as many as the object store's latency calls for
    pipeline = (
        PipelineBuilder()
        .add_source(range(len(ds)))
        .pipe(ds.fetch, concurrency=fetches, output_order="input")
        .pipe(ds.process, concurrency=workers, output_order="input")
        .aggregate(batch)
        .pipe(collate)
        .add_sink(4)
        .build(num_threads=fetches + workers)
    )
    with pipeline.auto_stop():
        yield from pipeline
