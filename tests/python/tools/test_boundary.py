"""The Python module and the CLI build on the public C++ API alone (include/mmfeed/): their
sources include no engine-internal header, and their CMake targets do not put the engine's
internal include directory (src/, the mmfeed_internal target) on their path — so a stray
include fails their build, and this test names it before the build does."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# Where the boundary's own headers live: the public API, and each side's private helpers.
ALLOWED = ("mmfeed/", "python/bindings/", "tools/")


def test_bindings_and_cli_include_only_public_headers():
    stray = []
    for folder in ("python/bindings", "tools"):
        for source in sorted((ROOT / folder).glob("*.[ch]*")):
            for header in INCLUDE.findall(source.read_text()):
                if not header.startswith(ALLOWED):
                    stray.append(f"{source.relative_to(ROOT)}: {header}")
    assert not stray, "engine-internal headers included across the boundary:\n" + "\n".join(stray)
    for header in sorted((ROOT / "include" / "mmfeed").glob("*.h")):  # the public headers themselves
        for included in INCLUDE.findall(header.read_text()):
            assert included.startswith("mmfeed/"), f"{header.name} includes {included}"


def test_their_targets_do_not_link_the_internal_headers():
    for cmake in ("python/CMakeLists.txt", "tools/CMakeLists.txt"):
        text = (ROOT / cmake).read_text()
        assert "mmfeed_internal" not in text, cmake
        assert "/src" not in text, cmake
