"""Issue 33: the data layouts users keep. LLaMA-Factory's and ms-swift's tagged messages, ShareGPT's
conversations with a system key, JSON array files and a media root each load into batches
byte-identical to the same conversations as a messages JSONL beside its images; bad elements are
named and every other sample delivered."""

import json

import datagen
import pytest
from conftest import ROOT, assert_same_batches, run_loader

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
OPTIONS = {"tensors": "np", "tokenizer": TOKENIZER, "max_pixels": 100_000, "batch_size": 4, "seed": 3}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("formats-data")
    datagen.generate(out, samples=23, seed=5, max_megapixels=0.6, workers=2)
    return out / "manifest.jsonl"


def samples_of(manifest):
    return [json.loads(line) for line in manifest.read_text().splitlines()]


def load(source, state=None, **options):
    r = run_loader(source, state, **{**OPTIONS, **options})
    return r["batches"], r["errors"], r["state"]


@pytest.fixture(scope="module")
def elsewhere(dataset, tmp_path_factory):
    """The data set's samples written elsewhere as LLaMA-Factory writes them: one JSON array
    (indented, as json.dump(indent=2) leaves it), tags in the text, paths relative to the data
    set's folder, which the loader is given as media_root."""
    out = tmp_path_factory.mktemp("llama-factory")
    tagged = [datagen.tagged_form(s) for s in samples_of(dataset)]
    (out / "mllm.json").write_text(json.dumps(tagged, indent=2, ensure_ascii=False))
    sharegpt = [datagen.tagged_form(s, shape="conversations") for s in samples_of(dataset)]
    (out / "sharegpt.jsonl").write_text("\n".join(json.dumps(s, ensure_ascii=False) for s in sharegpt) + "\n")
    return out


@pytest.mark.parametrize("layout", ["mllm.json", "sharegpt.jsonl"])
@pytest.mark.parametrize("packing", [{}, {"token_budget": 4000, "pack_window": 8}], ids=["padded", "packed"])
def test_tagged_samples_give_the_batches_of_their_messages_form(dataset, elsewhere, layout, packing):
    want, errors, _ = load(dataset, **packing)
    assert not errors
    got, errors, _ = load(elsewhere / layout, media_root=dataset.parent, **packing)
    assert not errors
    assert_same_batches(got, want)


def test_an_array_file_shards_and_resumes_as_jsonl_does(dataset, elsewhere):
    array = elsewhere / "mllm.json"
    for rank in range(3):
        want, _, _ = load(dataset, rank=rank, world_size=3)
        got, _, _ = load(array, media_root=dataset.parent, rank=rank, world_size=3)
        assert_same_batches(got, want)
    whole, _, _ = load(array, media_root=dataset.parent)
    with mmfeed.Loader(array, media_root=dataset.parent, **OPTIONS) as loader:
        first = [next(loader) for _ in range(2)]
        state = loader.state_dict()
    rest, _, _ = load(array, media_root=dataset.parent, state=state)
    assert_same_batches(first + rest, whole)


def test_listed_images_without_tags_are_an_error_not_a_loss(dataset, tmp_path):
    # Issue 33: {"messages": [... "<image>" ...], "images": [...]} loaded with no pixel rows and the
    # tags tokenized as text. A sample whose listed images have no tag is named, not trained text-only.
    tagged = [datagen.tagged_form(s) for s in samples_of(dataset)[:6]]
    for m in tagged[2]["messages"]:
        m["content"] = m["content"].replace("<image>", "")
    path = tmp_path / "untagged.jsonl"
    path.write_text("\n".join(json.dumps(s) for s in tagged) + "\n")
    batches, errors, _ = load(path, media_root=dataset.parent, on_error="skip", max_error_fraction=1.0)
    assert [e["sample_id"] for e in errors] == [tagged[2]["id"]]
    assert "images listed but 0 <image> placeholders" in errors[0]["reason"]
    delivered = [sid for b in batches for sid in b["sample_ids"]]
    assert sorted(delivered) == sorted(s["id"] for i, s in enumerate(tagged) if i != 2)
    assert sum(len(b["image_grid_thw"]) for b in batches) == sum(
        len(s["images"]) for i, s in enumerate(tagged) if i != 2
    )


def test_a_bad_element_of_an_array_is_named_and_the_rest_delivered(dataset, tmp_path):
    tagged = [datagen.tagged_form(s) for s in samples_of(dataset)[:5]]
    text = ",\n".join(json.dumps(s) for s in tagged[:3]) + ',\n{"messages": [1,]}' + ",\n" + json.dumps(tagged[4])
    path = tmp_path / "broken.json"
    path.write_text("[\n" + text + "\n]\n")
    batches, errors, _ = load(path, media_root=dataset.parent, on_error="skip", max_error_fraction=1.0)
    assert [e["sample_id"] for e in errors] == [f"{path}[3]"]
    assert "malformed JSON" in errors[0]["reason"]
    assert sorted(sid for b in batches for sid in b["sample_ids"]) == sorted(
        s["id"] for i, s in enumerate(tagged) if i != 3
    )


@pytest.mark.parametrize(
    "text, reason",
    [
        ('[{"messages": []}, {"messages": [', "the array is not closed (is the file truncated?)"),
        ('[{"messages": []}] {"x": 1}', "more after the array's end at byte 19"),
        ('[{"messages": []},, {}]', "an empty element at byte 18"),
        ('[{"messages": [}, {}]', "'}' where ']' closes element 0 at byte 15"),
    ],
)
def test_an_array_that_is_not_one_is_refused_by_name(tmp_path, text, reason):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="not a JSON array of samples") as raised:
        load(path)
    assert reason in str(raised.value) and str(path) in str(raised.value)


def test_media_root_is_one_for_all_or_one_per_manifest(dataset, elsewhere):
    array = elsewhere / "mllm.json"
    with pytest.raises(ValueError, match="media_root.*names 2 roots for 1 manifests"):
        load(array, media_root=[dataset.parent, dataset.parent])
    want, _, _ = load([dataset, dataset], shuffle=False)
    got, errors, _ = load([dataset, array], shuffle=False, media_root=["", dataset.parent])
    assert not errors
    assert [sid for b in got for sid in b["sample_ids"]] == [sid for b in want for sid in b["sample_ids"]]
    assert_same_batches(got, want)
