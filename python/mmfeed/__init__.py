"""mmfeed: a C++ data-loading engine that keeps GPUs fed during vision-language fine-tuning.

The native engine lives in ``mmfeed._mmfeed``; this package is its thin Python face.
"""

# __version__ is set on the module at import; the generated stub does not list it.
from mmfeed._mmfeed import (  # type: ignore[attr-defined]
    __version__,
    cuda_runtime,
    decode,
    decode_video,
    linked_libraries,
    probe_video,
    process_video,
    resize,
    sign_v4,
    simd_target,
)
from mmfeed.batch import Batch
from mmfeed.loader import Loader, LoaderInputs, read_config
from mmfeed.text import Tokenizer, encode_conversation, render_chat
from mmfeed.vision import ImageProcessor, normalize_pixels

__all__ = [
    "Batch",
    "ImageProcessor",
    "Loader",
    "LoaderInputs",
    "Tokenizer",
    "__version__",
    "cuda_runtime",
    "decode",
    "decode_video",
    "linked_libraries",
    "normalize_pixels",
    "probe_video",
    "process_video",
    "read_config",
    "resize",
    "encode_conversation",
    "render_chat",
    "sign_v4",
    "simd_target",
]
