"""The tokenizer against Hugging Face `tokenizers` (pinned in requirements.txt) on the Qwen3
tokenizer.json: identical ids on a corpus of more than 10 MB, identical decoding, and clear
refusals of what is not supported."""

import json

import pytest
from conftest import ROOT
from tokenizers import Tokenizer as HFTokenizer

import mmfeed

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"


@pytest.fixture(scope="module")
def tokenizers():
    return mmfeed.Tokenizer.from_file(TOKENIZER), HFTokenizer.from_file(str(TOKENIZER))


@pytest.fixture(scope="module")
def corpus():
    import corpus as corpus_module

    return corpus_module.build(min_bytes=10_000_000)


def test_corpus_is_large_and_varied(corpus):
    text = "".join(corpus)
    assert len(text.encode("utf-8")) >= 10_000_000
    for probe in ("中", "ア", "한", "ع", "ह", "👨‍👩‍👧‍👦", "\r\n", "<|im_end|>", "def ", "e\u0301"):
        assert probe in text, probe


def test_ids_identical_to_hf_on_the_corpus(tokenizers, corpus):
    ours, hf = tokenizers
    got = ours.encode_batch(corpus, threads=2)
    want = [e.ids for e in hf.encode_batch(corpus, add_special_tokens=False)]
    mismatches = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert not mismatches, f"{len(mismatches)} documents differ, first: {corpus[mismatches[0]][:200]!r}"
    assert sum(map(len, got)) > 2_000_000


def test_decode_identical_to_hf(tokenizers, corpus):
    ours, hf = tokenizers
    for doc in corpus[::50]:
        ids = hf.encode(doc, add_special_tokens=False).ids
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)
        assert ours.decode(ids, skip_special_tokens=True) == hf.decode(ids, skip_special_tokens=True)
    # Cut inside a multi-byte character: both replace the partial sequence with U+FFFD.
    ids = hf.encode("a😀b", add_special_tokens=False).ids
    for cut in range(len(ids) + 1):
        assert ours.decode(ids[:cut]) == hf.decode(ids[:cut])


def test_special_tokens_are_split_out_of_text(tokenizers):
    ours, _ = tokenizers
    assert ours.encode("x<|im_start|>y")[1] == 151644
    assert ours.token_to_id("<|image_pad|>") == 151655
    assert ours.token_to_id("Ġhello") == ours.encode(" hello")[0]


def test_hangul_jamo_11a7_survives_nfc(tokenizers):
    # utf8proc joins U+11A7 to an open syllable, deleting it; the reference keeps it.
    ours, hf = tokenizers
    for text in ["\uac00\u11a7", "\ud558\u11a7\u11a7 x", "a\u1100\u1161\u11a7\u0301"]:
        assert ours.encode(text) == hf.encode(text, add_special_tokens=False).ids, repr(text)


def test_invalid_utf8_is_an_error(tokenizers):
    ours, _ = tokenizers
    with pytest.raises(ValueError, match="not valid UTF-8"):
        ours._core.encode_bytes(b"abc\xff")


def _variant(edit):
    data = json.loads(TOKENIZER.read_text())
    edit(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    "edit,feature",
    [
        (lambda d: d["model"].update(type="WordPiece"), "model type 'WordPiece'"),
        (lambda d: d["model"].update(byte_fallback=True), "BPE byte_fallback"),
        (lambda d: d["model"].update(dropout=0.1), "BPE dropout"),
        (lambda d: d.update(normalizer={"type": "NFD"}), "normalizer 'NFD'"),
        (
            lambda d: (d.update(normalizer={"type": "NFKC"}), d["added_tokens"][0].update(normalized=True)),
            "added token '<|endoftext|>' matched in NFKC-normalized text",
        ),
        (lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(behavior="Removed"), "Split behavior 'Removed'"),
        (
            lambda d: d.update(
                post_processor={"type": "TemplateProcessing", "single": [], "pair": [], "special_tokens": {}}
            ),
            "post_processor 'TemplateProcessing'",
        ),
    ],
)
def test_unsupported_features_are_refused_by_name(edit, feature):
    with pytest.raises(ValueError, match=f"tokenizer.json: {feature}"):
        mmfeed.Tokenizer.from_str(_variant(edit))


def test_gpt2_style_byte_level_regex_matches_hf(tokenizers):
    # The same vocabulary with GPT-2's pre-tokenizer (ByteLevel with its own regex).
    text = _variant(
        lambda d: d.update(
            pre_tokenizer={"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
        )
    )
    ours, hf = mmfeed.Tokenizer.from_str(text), HFTokenizer.from_str(text)
    for s in ["Hello world  it's 2024!\n\n  code(x) = 1", "中文 and العربية", "  many   spaces\t\ttabs"]:
        assert ours.encode(s) == hf.encode(s, add_special_tokens=False).ids


@pytest.mark.parametrize("normalizer", [{"type": "NFKC"}, None])
def test_nfkc_and_no_normalizer_are_read_from_the_file(corpus, normalizer):
    """The normalizer is the file's: NFKC (compatibility forms folded: fullwidth letters,
    ligatures, superscripts, NBSP) or none, each giving `tokenizers`' ids on the corpus."""
    text = _variant(lambda d: d.update(normalizer=normalizer))
    ours, hf = mmfeed.Tokenizer.from_str(text), HFTokenizer.from_str(text)
    probes = [
        "Ｆｕｌｌ ｗｉｄｔｈ １２３",
        "ﬁne ﬂow",
        "x² + y³ = z⁴",
        "a\u00a0b",
        "Ⅻ ① ㎞",
        "e\u0301 ḱ ﬀ\u0301",
        "ｶﾀｶﾅ ﾞ",
    ]
    docs = corpus[::8] + probes
    got = ours.encode_batch(docs, threads=2)
    want = [e.ids for e in hf.encode_batch(docs, add_special_tokens=False)]
    mismatches = [i for i, (a, b) in enumerate(zip(got, want)) if a != b]
    assert not mismatches, f"{len(mismatches)} differ, first: {docs[mismatches[0]][:200]!r}"
    if normalizer:  # the folding happened: the fullwidth probe is the ASCII text's ids
        assert ours.encode(probes[0]) == ours.encode("Full width 123")


def test_missing_file_names_the_path():
    with pytest.raises(ValueError, match="cannot open tokenizer file"):  # as the Loader says it
        mmfeed.Tokenizer.from_file(ROOT / "nope.json")
