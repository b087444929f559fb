"""mmfeed: a C++ data-loading engine that keeps GPUs fed during vision-language fine-tuning.

The native engine lives in ``mmfeed._mmfeed``; this package is its thin Python face.
"""

# __version__ is set on the module at import; the generated stub does not list it.
from mmfeed._mmfeed import (  # type: ignore[attr-defined]
    __version__,
    audio_libraries,
    cuda_runtime,
    decode,
    decode_video,
    linked_libraries,
    probe_audio,
    probe_video,
    process_video,
    resize,
    sign_v4,
    simd_target,
)
from mmfeed.audio import AudioProcessor, load_audio, resample_audio
from mmfeed.batch import Batch
from mmfeed.loader import Loader, LoaderInputs, balance_report, read_config
from mmfeed.text import Tokenizer, encode_conversation, render_chat
from mmfeed.vision import ImageProcessor, normalize_pixels

__all__ = [
    "AudioProcessor",
    "Batch",
    "ImageProcessor",
    "Loader",
    "LoaderInputs",
    "Tokenizer",
    "__version__",
    "audio_libraries",
    "balance_report",
    "cuda_runtime",
    "decode",
    "decode_video",
    "linked_libraries",
    "load_audio",
    "normalize_pixels",
    "probe_audio",
    "probe_video",
    "process_video",
    "read_config",
    "resize",
    "encode_conversation",
    "render_chat",
    "resample_audio",
    "sign_v4",
    "simd_target",
]
