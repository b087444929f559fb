"""mmfeed.load_audio against librosa.load (the Omni models' loader, through qwen-omni-utils):
every container and sample format, channel layouts from mono to 7.1, rates from 8 to 96 kHz,
crops, and the bad files a data set holds."""

from __future__ import annotations

import io
import warnings
import wave

import librosa
import numpy as np
import pytest
import soundfile as sf
from audio_clips import CLIPS, VIDEO, make_clips, noise
from conftest import ffmpeg

import mmfeed

# Formats libsndfile decodes with another library than FFmpeg's decoders: the samples differ by
# at most these bounds (measured on the clips here: MP3 libmpg123 against FFmpeg's mp3float ~9e-7;
# Vorbis libvorbis against FFmpeg's decoder ~1.5e-7; Opus the soundfile wheel's libopus against
# Debian's ~2e-5), then pass through the same resampler. Everything else is equal bit for bit.
LOSSY = {"speech.mp3": 5e-6, "speech.ogg": 1e-6, "speech.opus": 1e-4}


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    return make_clips(tmp_path_factory.mktemp("audio"))


def librosa_load(path, **kw) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "PySoundFile failed. Trying audioread instead."
        return librosa.load(path, **kw)[0]


@pytest.mark.parametrize("name", [*CLIPS, VIDEO])
def test_samples_equal_librosas(clips, name):
    path = clips / name
    want = librosa_load(path, sr=16000)
    got = mmfeed.load_audio(path)
    assert got.dtype == np.float32 and got.shape == want.shape
    if name in LOSSY:
        np.testing.assert_allclose(got, want, rtol=0, atol=LOSSY[name])
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["tones-44k-stereo.wav", "speech-24bit.flac", "tones-7.1-96k.wav", "noise-44k.m4a"])
def test_native_rate_samples_equal_librosas(clips, name):
    # sr=None: decoding and the channel mean alone, no resampler.
    want = librosa_load(clips / name, sr=None)
    np.testing.assert_array_equal(mmfeed.load_audio(clips / name, sampling_rate=0), want)


@pytest.mark.parametrize("name", ["speech-48k-s24.wav", "tones-5.1-48k.flac", "noise-44k.m4a", VIDEO])
@pytest.mark.parametrize("start,end", [(0.5, None), (None, 1.25), (0.333, 1.777), (1.0, 99.0)])
def test_crops_equal_librosas_offset_and_duration(clips, name, start, end):
    # qwen-omni-utils: librosa.load(offset=audio_start or 0, duration=audio_end - audio_start).
    offset = start or 0.0
    want = librosa_load(clips / name, sr=16000, offset=offset, duration=None if end is None else end - offset)
    np.testing.assert_array_equal(mmfeed.load_audio(clips / name, start=start, end=end), want)


def test_a_ten_minute_clip_resamples_as_librosa(tmp_path):
    # python-soxr feeds long inputs in chunks; libsoxr's output does not depend on them.
    path = tmp_path / "long.flac"
    ffmpeg(*noise(44100, 600.0, "brown"), path)
    want = librosa_load(path, sr=16000)
    got = mmfeed.load_audio(path)
    assert got.shape == want.shape == (9_600_000,)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("rate", [8000, 11025, 22050, 44100, 48000, 96000])
def test_resample_equals_librosas(rate):
    samples = np.random.default_rng(rate).standard_normal(rate * 2 + 7).astype(np.float32) * 0.2
    want = librosa.resample(samples, orig_sr=rate, target_sr=16000, res_type="soxr_hq")
    np.testing.assert_array_equal(mmfeed.resample_audio(samples, rate, 16000), want)


def test_probe_names_the_stream(clips):
    info = mmfeed.probe_audio((clips / "tones-5.1-48k.flac").read_bytes())
    assert (info["sample_rate"], info["channels"], info["codec"], info["container"]) == (48000, 6, "flac", "flac")
    assert info["duration_s"] == pytest.approx(2.0)


def wav_bytes(samples: np.ndarray, rate: int, subtype: str = "PCM_16") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, samples, rate, format="WAV", subtype=subtype)
    return buf.getvalue()


def test_bad_files_are_errors_naming_the_reason(clips, tmp_path):
    good = (clips / "speech-22k.wav").read_bytes()
    cases = {
        "not a container": b"\x00\x01not audio at all" * 64,
        "truncated": good[: len(good) // 2 + 1],  # mid-sample too
        "no audio stream": None,
        "holds no samples": wav_bytes(np.zeros(0, np.float32), 16000),
        "not finite": wav_bytes(np.array([0.1, np.nan, 0.2] * 100, np.float32), 16000, "FLOAT"),
        "sample rate": None,
    }
    silent = tmp_path / "silent.mp4"
    ffmpeg("-f", "lavfi", "-i", "testsrc2=size=64x48:rate=10:duration=1", "-c:v", "libx264", silent)
    cases["no audio stream"] = silent.read_bytes()
    raw = io.BytesIO()
    with wave.open(raw, "wb") as w:  # a header claiming 1 MHz
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(1_000_000)
        w.writeframes(b"\x00\x01" * 1000)
    cases["sample rate"] = raw.getvalue()
    for reason, data in cases.items():
        with pytest.raises(ValueError, match=reason):
            mmfeed.load_audio(data)


def test_bad_crops_and_lengths_are_errors(clips):
    data = (clips / "speech-22k.wav").read_bytes()
    with pytest.raises(ValueError, match="must come after audio_start"):
        mmfeed.load_audio(data, start=2.0, end=1.0)
    with pytest.raises(ValueError, match=">= 0"):
        mmfeed.load_audio(data, start=-1.0)
    with pytest.raises(ValueError, match="past the clip's end"):
        mmfeed.load_audio(data, start=500.0)
    with pytest.raises(ValueError, match="over the limit of 2 s"):
        mmfeed.load_audio(data, max_seconds=2.0)
    assert len(mmfeed.load_audio(data, end=1.5, max_seconds=2.0)) == 24000  # the crop is what counts


@pytest.mark.parametrize("name", ["tones-44k-stereo.wav", "speech.ogg", "speech-24bit.flac", VIDEO])
def test_a_soundtrack_is_read_as_qwen_omni_utils_reads_a_videos_audio(clips, name):
    # use_audio_in_video: qwen-omni-utils hands librosa audioread's FFmpegAudioFile (ffmpeg's
    # 16-bit samples) whatever the container, cropped by video_start / video_end.
    from audioread.ffdec import FFmpegAudioFile

    path = clips / name
    for start, end in [(None, None), (0.25, 1.5)]:
        offset = start or 0.0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = librosa.load(
                FFmpegAudioFile(str(path)), sr=16000, offset=offset, duration=None if end is None else end - offset
            )[0]
        got = mmfeed.load_audio(path, start=start, end=end, soundtrack=True)
        np.testing.assert_array_equal(got, want)
    features = mmfeed.AudioProcessor("qwen3-omni")([path], soundtrack=True)["input_features"]
    samples = mmfeed.load_audio(path, soundtrack=True)
    np.testing.assert_array_equal(features, mmfeed.AudioProcessor("qwen3-omni")([samples])["input_features"])
