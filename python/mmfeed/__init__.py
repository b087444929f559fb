"""mmfeed: a C++ data-loading engine that keeps GPUs fed during vision-language fine-tuning.

The native engine lives in ``mmfeed._mmfeed``; this package is its thin Python face.
"""

from mmfeed._mmfeed import __version__, linked_libraries, sign_v4

__all__ = ["__version__", "linked_libraries", "sign_v4"]
