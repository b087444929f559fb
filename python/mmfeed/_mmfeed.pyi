"""mmfeed native engine"""

from collections.abc import Sequence
from typing import Annotated

import numpy
from numpy.typing import NDArray


def linked_libraries() -> list:
    """
    The native libraries the engine is linked with, as a list of dicts with keys name, version and detail.
    """

def usable_cpus() -> int:
    """
    The CPUs this process may use, as workers="auto" counts them: its CPU affinity, capped by the smallest cgroup v2 cpu.max quota from its cgroup up to the root (rounded up).
    """

def cgroup_cpu_limit() -> float | None:
    """
    The smallest cgroup v2 cpu.max quota (quota / period, in cores) from this process's cgroup up to the root, or None where none is set.
    """

def sign_v4(method: str, host: str, path: str, *, query: Sequence[tuple[str, str]] = [], headers: Sequence[tuple[str, str]] = [], payload_hash: str = 'UNSIGNED-PAYLOAD', access_key: str, secret_key: str, session_token: str = '', region: str = 'us-east-1', service: str = 's3', amz_date: str, content_sha256_header: bool = True) -> dict:
    """
    AWS Signature Version 4 of one request, as mmfeed's S3 client signs it. `path` and the query pairs are raw (unencoded). Returns canonical_request, string_to_sign, signature, authorization and the headers to send.
    """

def video_libraries() -> str:
    """
    The FFmpeg libraries videos are decoded with, or why this build has none.
    """

def probe_video(data: bytes) -> dict:
    """
    What a video file's best video stream holds: width, height, frames, fps, duration_s, codec, rotation.
    """

def decode_video(data: bytes, indices: Sequence[int]) -> NDArray[numpy.uint8]:
    """
    The frames at `indices` (presentation order, ascending) of a video file as a (n, height, width, 3) uint8 RGB array.
    """

def plan_video_frames(total_frames: int, video_fps: float, nframes: float | None = None, fps: float | None = None, min_frames: float | None = None, max_frames: float | None = None, video_start: float | None = None, video_end: float | None = None) -> dict:
    """
    The frames qwen-vl-utils keeps for Qwen2/2.5-VL (first, last, indices, sample_fps).
    """

def process_video(data: bytes, model: str = 'qwen2-vl', output: str = 'float32', nframes: float | None = None, fps: float | None = None, min_frames: float | None = None, max_frames: float | None = None, video_start: float | None = None, video_end: float | None = None, min_pixels: float | None = None, max_pixels: float | None = None, total_pixels: float | None = None) -> dict:
    """
    A video file's pixel_values_videos rows and video_grid_thw as the model's recipe makes them (Qwen2/2.5-VL: qwen-vl-utils' sampling and sizing, then the HF video processor; Qwen3-VL: its HF video processor), with the frames decoded (indices), their size, the file's and the sampled frame rate, Qwen2.5-VL's second_per_grid_t and Qwen3-VL's per-group timestamps. Keyword arguments are the content item's keys.
    """

class _ImageProcessor:
    def __init__(self, model: str, backend: str, min_pixels: int | None, max_pixels: int | None, patch_size: int | None, merge_size: int | None, image_mean: Sequence[float] | None, image_std: Sequence[float] | None, exif: bool, alpha: str, output: str, kernel: str, threads: int, fast: bool) -> None: ...

    def process(self, images: list, alphas: Sequence[str] | None = None) -> tuple: ...

    def plan(self, height: int, width: int) -> tuple: ...

def resize(image: Annotated[NDArray[numpy.uint8], dict(order='C', device='cpu', writable=False)], width: int, height: int, filter: str = 'bicubic', kernel: str = 'auto') -> NDArray[numpy.uint8]:
    """
    Pillow-exact resize of a uint8 (height, width, channels) array to (height, width, channels); 'bicubic-torch' is torch's antialiased bicubic on uint8 (torchvision's resize), byte for byte.
    """

def decode(data: bytes, exif: bool = True, alpha: str = 'drop') -> NDArray[numpy.uint8]:
    """
    Decodes JPEG/PNG/WebP bytes to a (height, width, 3) uint8 array exactly as Pillow's open + exif_transpose + convert('RGB') (alpha per policy).
    """

def normalize_table(model: str, video: bool = False, backend: str = 'pil') -> tuple:
    """
    (float32 table, bfloat16 table as uint16 words, temporal_patch_size, patch_size): the value of each byte of each channel as the model's image processor of that backend (or, video=True, its video processor) normalizes it, exactly the engine's.
    """

def simd_target() -> str:
    """
    The SIMD instruction set the resampling kernels dispatched to on this CPU.
    """

class _AudioProcessor:
    def __init__(self, model: str, padding: str, max_seconds: float, threads: int) -> None: ...

    def process(self, clips: list, starts: Sequence[float | None], ends: Sequence[float | None], soundtracks: Sequence[bool]) -> tuple: ...

    def tokens(self, frames: int) -> int: ...

def load_audio(data: bytes, sampling_rate: int = 16000, start: float | None = None, end: float | None = None, max_seconds: float = 3600.0, soundtrack: bool = False) -> NDArray[numpy.float32]:
    """
    Mono float32 samples at sampling_rate (0: the file's), as librosa.load(sr=..., offset, duration).
    """

def resample_audio(samples: Annotated[NDArray[numpy.float32], dict(shape=(None,), order='C', device='cpu', writable=False)], from_rate: int, to_rate: int) -> NDArray[numpy.float32]:
    """
    Mono float32 samples resampled as librosa.resample(res_type='soxr_hq').
    """

def probe_audio(data: bytes) -> dict:
    """
    The best audio stream's sample rate, channels, stated duration, codec and container.
    """

def audio_libraries() -> str:
    """The libraries audio is decoded, resampled and transformed with."""

def render_chat(sample_json: str, template: str, add_generation_prompt: bool, add_vision_id: bool, enable_thinking: bool | None = None, add_audio_id: bool = False) -> str: ...

def encode_conversation(tokenizer: _Tokenizer, sample_json: str, image_grids: Sequence[Sequence[int]], video_grids: Sequence[Sequence[int]], second_per_grid_ts: Sequence[float], video_timestamps: Sequence[Sequence[float]], audio_tokens: Sequence[int], video_audio_tokens: Sequence[int], tokens_per_second: int, template: str, max_length: int, truncation: str, labels: str, mrope: bool, add_vision_id: bool, merge_size: int, train_reasoning: bool) -> dict: ...

class _Tokenizer:
    @staticmethod
    def from_file(path: str) -> _Tokenizer: ...

    @staticmethod
    def from_str(json: str) -> _Tokenizer: ...

    def encode(self, text: str) -> list[int]: ...

    def encode_bytes(self, data: bytes) -> list[int]: ...

    def encode_batch(self, texts: Sequence[str], threads: int = 1) -> list[list[int]]: ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str: ...

    def token_to_id(self, arg: str, /) -> int | None: ...

    def vocab_size(self) -> int: ...

def _check_loader_options(arg: dict, /) -> None:
    """
    Raises what opening a loader with these options would raise for an unknown name or a wrong type.
    """

def loader_options() -> list:
    """
    The engine's loader options, from its one option table: [{name, type, default, doc}, ...].
    """

def read_config(path: str) -> str:
    """
    The loader options a config file sets (a JSON object, or a TOML table in *.toml), as the CLI's --config reads it: a JSON object of option names and values.
    """

def reshard_states(states: Sequence[str], rank: int, world_size: int) -> str: ...

def epoch_sizes(options: dict, state: str | None = None, inputs: _LoaderInputs | None = None) -> list[int]:
    """
    The positions of each epoch's order for a run of these options (resumed at `state`), without starting it.
    """

def balance_report(options: dict) -> dict:
    """
    Each step's largest rank cost over the mean, as drawn and as balance= splits it (mmfeed/balance.h).
    """

def cost_model(options: dict) -> list[float]:
    """
    The four coefficients balance= plans with for these options (balance_cost's order): balance_cost's, else the default model's FLOPs; balance="tokens": one a token.
    """

def open_step(options: dict, state: str) -> tuple[int, int]:
    """
    (epoch, step): the first balanced step of the state's epoch none of whose samples it consumed (LoaderState::open_step).
    """

def group_positions(options: dict) -> int:
    """
    The positions of one batch's group for these options: batch_size, or pack_window when packing.
    """

def cuda_runtime() -> str:
    """
    Whether batch memory can be pinned: the CUDA runtime found at run time, or why none was.
    """

class _LoaderInputs:
    def __init__(self, options: dict) -> None:
        """
        Reads the manifests and loads the tokenizer of these loader options (LoaderInputs::read).
        """

class _Loader:
    def __init__(self, config: dict, state: str | None, inputs: _LoaderInputs | None = None) -> None: ...

    def next(self, torch: bool = False, stream: int = 0) -> object: ...

    def state(self) -> str: ...

    def errors(self) -> list: ...

    def metrics(self) -> str: ...

    def close(self) -> None: ...

def build_index(source: str, options: dict, parts: Sequence[bytes] = []) -> dict:
    """
    Builds `source`'s dataset index (mmfeed index SOURCE); `parts`: its samples described apart by describe_index_part, in order. Returns what it found, as `mmfeed index --json` prints it.
    """

def index_files(source: str) -> tuple:
    """
    What build_index indexes `source` as: ('shards' or 'parquet', the files indexed one by one) or ('manifest', [source]).
    """

def plan_index_parts(source: str, parts: int) -> list:
    """
    About `parts` byte ranges (begin, end) of the manifest's text that describe_index_part describes apart.
    """

def describe_index_part(source: str, begin: int, end: int, options: dict) -> bytes:
    """
    The samples whose lines start in bytes [begin, end) of the manifest's text, described for build_index.
    """
