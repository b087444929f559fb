import tomllib
from conftest import ROOT

import mmfeed


def test_version_matches_the_package_metadata():
    with open(ROOT / "pyproject.toml", "rb") as f:
        assert mmfeed.__version__ == tomllib.load(f)["project"]["version"]


def test_engine_reports_every_native_library():
    libs = {lib["name"]: lib for lib in mmfeed.linked_libraries()}
    video = {"FFmpeg"} if mmfeed._mmfeed.video_libraries().startswith("libavformat") else set()
    assert (
        set(libs)
        == {
            "libcurl",
            "OpenSSL",
            "libjpeg-turbo",
            "libspng",
            "libwebp",
            "simdjson",
            "PCRE2",
            "utf8proc",
            "Highway",
            "expat",
        }
        | video
    )
    assert all(lib["version"][0].isdigit() for lib in libs.values())
    assert "JIT" in libs["PCRE2"]["detail"]


def test_type_stubs_ship_with_the_package():
    import ast
    from pathlib import Path

    package = Path(mmfeed.__file__).parent
    assert (package / "py.typed").exists()
    stub = (package / "_mmfeed.pyi").read_text()
    tree = ast.parse(stub)
    names = {node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert {"resize", "decode", "sign_v4", "_Loader", "_Tokenizer", "_ImageProcessor"} <= names
