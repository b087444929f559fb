"""mmfeed.AudioProcessor against transformers' WhisperFeatureExtractor as the Omni processors call
it (Qwen2.5-Omni: every clip padded to 300 s; Qwen3-Omni: to the longest clip of the call), and the
audio token counts against the processors' own formulas.

Tolerance. The reference computes the spectrogram in float32 (torch.stft, MKL's FFT, a float32
matrix product); mmfeed in float64. Where a mel bin's energy is far above the clip's floor the two
agree to float32 rounding: for values more than 1 (four decades of power) above the floor, fewer
than 1 in 10,000 differ by more than 1e-6 and none by more than 1e-5 (the outliers are bins weak
within their own frame, whose float32 FFT error is a larger share). Near the floor (bins ~1e-8 of
the clip's loudest) float32's FFT error is a large share of the bin's energy; the reference's own numpy path (float64, `_np_extract_fbank_features`) differs
from its torch path by the same amount there (asserted below): within 1e-4 there.
"""

from __future__ import annotations

import numpy as np
import pytest
from audio_clips import make_clips
from transformers import WhisperFeatureExtractor
from transformers.models.qwen2_5_omni.processing_qwen2_5_omni import _get_feat_extract_output_lengths as qwen2_5_tokens
from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import (
    _get_feat_extract_output_lengths as qwen3_tokens,
)

import mmfeed

NAMES = ["speech-22k.wav", "tones-44k-stereo.wav", "noise-44k.m4a", "speech.mp3", "tones-5.1-48k.flac"]


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return make_clips(tmp_path_factory.mktemp("audio"))


def extractor() -> WhisperFeatureExtractor:
    # Both checkpoints' preprocessor_config.json (Qwen2.5-Omni-7B, Qwen3-Omni-30B-A3B).
    return WhisperFeatureExtractor(
        feature_size=128,
        sampling_rate=16000,
        hop_length=160,
        n_fft=400,
        chunk_length=300,
        padding_value=0.0,
        return_attention_mask=True,
    )


def reference(samples: list[np.ndarray], model: str) -> dict:
    # The processors' audio kwargs: Qwen2.5-Omni pads to max_length (300 s), truncating;
    # Qwen3-Omni pads to the longest, no truncation.
    if model == "qwen2.5-omni":
        kw = dict(padding="max_length", truncation=True)
    else:
        kw = dict(padding=True, truncation=False)
    return extractor()(samples, sampling_rate=16000, return_attention_mask=True, return_tensors="np", **kw)


def assert_close_to_reference(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == np.float32
    for g, w in zip(got, want):
        far = w > w.min() + 1.0
        np.testing.assert_allclose(g[far], w[far], rtol=0, atol=1e-5)
        assert np.count_nonzero(np.abs(g[far] - w[far]) > 1e-6) <= 1e-4 * far.size
        np.testing.assert_allclose(g, w, rtol=0, atol=1e-4)


@pytest.mark.parametrize("model", ["qwen2.5-omni", "qwen3-omni"])
def test_features_and_masks_equal_the_extractors(clips, model):
    samples = [mmfeed.load_audio(clips / n) for n in NAMES]
    want = reference(samples, model)
    got = mmfeed.AudioProcessor(model, threads=2)([clips / n for n in NAMES])
    np.testing.assert_array_equal(got["feature_attention_mask"], want["attention_mask"])
    assert got["feature_attention_mask"].dtype == np.int32
    assert_close_to_reference(got["input_features"], want["input_features"])


def test_the_tolerance_is_the_references_own_float32_error(clips):
    # Near the floor the extractor's torch path and its float64 numpy path differ as much as
    # mmfeed and the torch path do: the bound is float32's, not an approximation of ours.
    x = mmfeed.load_audio(clips / "speech-22k.wav")
    length = 160 * 600
    padded = np.zeros((1, length), np.float32)
    padded[0, : len(x)] = x
    fe = extractor()
    torch_path = fe._torch_extract_fbank_features(padded, "cpu")[0]
    numpy_path = fe._np_extract_fbank_features(padded, "cpu")[0]
    ours = mmfeed.AudioProcessor("qwen3-omni")([padded[0]])["input_features"][0]
    assert np.abs(torch_path - numpy_path).max() > 1e-5  # the reference disagrees with itself there
    assert np.abs(ours - numpy_path).max() <= np.abs(torch_path - numpy_path).max() * 1.5


def test_silence_short_and_over_long_clips(clips):
    rng = np.random.default_rng(3)
    samples = [
        np.zeros(16000, np.float32),  # silence: every value the floor
        (rng.standard_normal(1601) * 0.1).astype(np.float32),  # 0.1 s, a frame not filled
        (rng.standard_normal(4_800_000 + 32_000) * 0.05).astype(np.float32),  # 302 s: cut at 300 s
    ]
    want = reference(samples, "qwen2.5-omni")
    got = mmfeed.AudioProcessor("qwen2.5-omni")(samples)
    np.testing.assert_array_equal(got["feature_attention_mask"], want["attention_mask"])
    assert_close_to_reference(got["input_features"], want["input_features"])
    assert (got["input_features"][0] == np.float32(-1.5)).all()  # (-10 + 4) / 4


def test_qwen3_padding_depends_on_the_call_as_the_reference(clips):
    # A clip alone is padded to itself (reflected at its end); beside a longer one, with zeros.
    short = mmfeed.load_audio(clips / "speech.mp3", end=1.0)
    long = mmfeed.load_audio(clips / "speech-22k.wav")
    proc = mmfeed.AudioProcessor("qwen3-omni")
    alone, pair = proc([short]), proc([short, long])
    want_alone, want_pair = reference([short], "qwen3-omni"), reference([short, long], "qwen3-omni")
    np.testing.assert_array_equal(alone["feature_attention_mask"], want_alone["attention_mask"])
    np.testing.assert_array_equal(pair["feature_attention_mask"], want_pair["attention_mask"])
    assert_close_to_reference(alone["input_features"], want_alone["input_features"])
    assert_close_to_reference(pair["input_features"], want_pair["input_features"])


def test_qwen2_5_padded_to_the_longest_keeps_the_fixed_lengths_values(clips):
    paths = [clips / n for n in NAMES]
    fixed = mmfeed.AudioProcessor("qwen2.5-omni")(paths)
    longest = mmfeed.AudioProcessor("qwen2.5-omni", padding="longest")(paths)
    frames = int(fixed["feature_attention_mask"].sum(-1).max())
    assert longest["input_features"].shape == (len(paths), 128, frames)
    np.testing.assert_array_equal(longest["input_features"], fixed["input_features"][:, :, :frames])
    np.testing.assert_array_equal(longest["feature_attention_mask"], fixed["feature_attention_mask"][:, :frames])


def test_arrays_are_cropped_as_qwen_omni_utils_crops_them():
    # An array is taken at 16 kHz: samples [int(16000 * start), int(16000 * end)), not resampled.
    x = (np.random.default_rng(5).standard_normal(48000) * 0.1).astype(np.float32)
    proc = mmfeed.AudioProcessor("qwen3-omni")
    got = proc([x], audio_start=0.5, audio_end=2.25)
    want = proc([x[8000:36000].copy()])
    np.testing.assert_array_equal(got["input_features"], want["input_features"])


@pytest.mark.parametrize("model,formula", [("qwen2.5-omni", qwen2_5_tokens), ("qwen3-omni", qwen3_tokens)])
def test_token_counts_are_the_processors(model, formula):
    proc = mmfeed.AudioProcessor(model)
    frames = np.arange(1, 30_001)
    np.testing.assert_array_equal(proc.tokens(frames), formula(frames))
    assert proc.tokens(3000) == int(formula(np.array([3000]))[0])


def test_bad_clips_are_named_by_index(clips):
    proc = mmfeed.AudioProcessor("qwen2.5-omni")
    with pytest.raises(ValueError, match="audio 1: audio: not a container"):
        proc([clips / "speech-22k.wav", b"garbage" * 100])
    with pytest.raises(ValueError, match="reflect padding"):
        mmfeed.AudioProcessor("qwen3-omni")([np.zeros(150, np.float32)])
    with pytest.raises(ValueError, match="unknown model"):
        mmfeed.AudioProcessor("whisper")
    with pytest.raises(ValueError, match="padding must be"):
        mmfeed.AudioProcessor(padding="shortest")
    with pytest.raises(ValueError, match="mono"):
        proc([np.zeros((2, 100), np.float32)])
