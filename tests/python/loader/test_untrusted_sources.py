"""Issue 31: what comes from an untrusted source -- a remote manifest, a server's answer, a URL
that carries a credential -- reaches only what it may and is shown without its secrets.

The CLI tests (named *cli*) need only the mmfeed binary (MMFEED_CLI); the others import the extension."""

import json
import subprocess

import pytest
from conftest import ROOT, run_fetch
from servers import Nginx

TOKENIZER = ROOT / "tests" / "data" / "qwen3-tokenizer" / "tokenizer.json"
SECRET = "SECRETTOKEN-31"  # the content of the local file a hostile manifest points at
PRESIGNED = (
    "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDSECRET31%2F20260101%2Fus-east-1%2Fs3"
    "&X-Amz-Expires=3600&X-Amz-Security-Token=TOKENSECRET31&X-Amz-Signature=SIGSECRET31"
)
SECRETS = ("AKIDSECRET31", "TOKENSECRET31", "SIGSECRET31")


def sample(*refs, sid="s"):
    return {
        "id": sid,
        "messages": [
            {
                "role": "user",
                "content": [*({"type": "image", "image": r} for r in refs), {"type": "text", "text": "?"}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "a picture"}]},
        ],
    }


def write_manifest(path, *samples):
    path.write_text("".join(json.dumps(s) + "\n" for s in samples))
    return path


@pytest.fixture(scope="module")
def secret_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("private") / "token.txt"
    path.write_text(SECRET + "\n")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory, secret_file):
    """nginx serving a manifest that names a local file, by absolute path and by file:// URI."""
    root = tmp_path_factory.mktemp("served")
    write_manifest(root / "absolute.jsonl", sample(str(secret_file)))
    write_manifest(root / "file-uri.jsonl", sample(secret_file.as_uri()))
    with Nginx(root, tmp_path_factory.mktemp("nginx-untrusted")) as server:
        yield server


@pytest.mark.parametrize("manifest", ["absolute.jsonl", "file-uri.jsonl"])
def test_cli_fetch_refuses_local_files_a_remote_manifest_names(cli, served, secret_file, manifest):
    proc = subprocess.run(
        [cli, "fetch", "--from-manifest", served.url("ok", manifest)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"the local file {secret_file} is named by a remote manifest: refused" in proc.stderr, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr


def test_cli_fetch_reads_local_files_of_a_remote_manifest_when_allowed(cli, served):
    rc, report = run_fetch(
        cli,
        "--from-manifest",
        served.url("ok", "absolute.jsonl"),
        "--allow-local-media-from-remote-manifest",
        timeout=120,
    )
    assert rc == 0 and report["ok"] == 1, report


def test_cli_run_skips_local_files_a_remote_manifest_names(cli, served, secret_file):
    proc = subprocess.run(
        [cli, "run", served.url("ok", "absolute.jsonl"), "--tokenizer", TOKENIZER, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # The one sample fails: the run fails, and says why, naming the file but never its bytes.
    assert proc.returncode != 0
    assert f"the local file {secret_file} is named by a remote manifest: refused" in proc.stdout + proc.stderr
    assert SECRET not in proc.stdout + proc.stderr


def test_cli_run_never_shows_the_bytes_of_a_file_that_is_not_an_image(cli, tmp_path, secret_file):
    manifest = write_manifest(tmp_path / "m.jsonl", sample(str(secret_file)))
    proc = subprocess.run(
        [cli, "run", manifest, "--tokenizer", TOKENIZER, "--json"], capture_output=True, text=True, timeout=120
    )
    out = proc.stdout + proc.stderr
    assert "not a JPEG, PNG or WebP image: unrecognised signature (15 bytes)" in out, out
    assert "SECRET" not in out and "53 45 43" not in out


def test_cli_fetch_refuses_a_nul_byte_in_a_media_reference(cli, tmp_path):
    (tmp_path / "ok.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    manifest = write_manifest(tmp_path / "m.jsonl", sample("ok.png\u0000.jpg"))
    proc = subprocess.run([cli, "fetch", "--from-manifest", manifest], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "m.jsonl:1 (sample s): ok.png\\x00.jpg: URI contains a NUL byte (at byte 6)" in proc.stderr, proc.stderr


def test_cli_fetch_report_holds_no_presigned_credentials(cli, served):
    url = served.url("status/403", "x.jpg")
    rc, report = run_fetch(cli, url + PRESIGNED, "--max-attempts", "1", timeout=120)
    assert rc == 1 and report["failed"] == 1
    text = json.dumps(report)
    assert not [s for s in SECRETS if s in text], text
    shown = (
        url + "?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=REDACTED&X-Amz-Expires=3600"
        "&X-Amz-Security-Token=REDACTED&X-Amz-Signature=REDACTED"
    )
    assert report["failures"][0]["uri"] == shown
    assert report["failures"][0]["error"] == shown + ": HTTP 403 (an answer of 10 bytes, not shown)"
    plain = subprocess.run(
        [cli, "fetch", "--max-attempts", "1", url + PRESIGNED], capture_output=True, text=True, timeout=120
    )
    assert not [s for s in SECRETS if s in plain.stdout + plain.stderr], plain.stdout


def test_cli_run_report_and_trace_hold_no_presigned_credentials(cli, served, tmp_path):
    manifest = write_manifest(tmp_path / "m.jsonl", sample(served.url("status/403", "x.jpg") + PRESIGNED))
    trace = tmp_path / "trace.json"
    proc = subprocess.run(
        [cli, "run", manifest, "--tokenizer", TOKENIZER, "--json", "--trace", trace],
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = proc.stdout + proc.stderr
    assert "X-Amz-Signature=REDACTED" in out, out
    assert not [s for s in SECRETS if s in out], out
    if trace.exists():  # a run that fails may still write its trace: it must be clean too
        assert not [s for s in SECRETS if s in trace.read_text()]


# ---- the Loader (needs the extension) ----------------------------------------------------------


def test_loader_refuses_local_files_a_remote_manifest_names(served, secret_file):
    import mmfeed

    with mmfeed.Loader(
        served.url("ok", "file-uri.jsonl"), tokenizer=TOKENIZER, tensors="np", max_error_fraction=1.0
    ) as loader:
        with pytest.raises(Exception) as failed:  # its only sample fails: the run fails
            list(loader)
        errors = loader.errors()
    assert SECRET not in str(failed.value)
    assert len(errors) == 1 and errors[0]["stage"] == "manifest"
    assert errors[0]["reason"].startswith(f"the local file {secret_file} is named by a remote manifest: refused")


def test_loader_reads_local_files_of_a_remote_manifest_when_allowed(served):
    import mmfeed

    with mmfeed.Loader(
        served.url("ok", "absolute.jsonl"),
        tokenizer=TOKENIZER,
        tensors="np",
        allow_local_media_from_remote_manifest=True,
        max_error_fraction=1.0,
    ) as loader:
        with pytest.raises(ValueError, match="every sample failed"):
            list(loader)  # the file is read (and is no image)
        errors = loader.errors()
    assert errors[0]["stage"] == "image"
    assert errors[0]["reason"].endswith("not a JPEG, PNG or WebP image: unrecognised signature (15 bytes)")
    assert SECRET not in errors[0]["reason"]


def test_loader_errors_hold_no_presigned_credentials(served, tmp_path):
    import mmfeed

    manifest = write_manifest(tmp_path / "m.jsonl", sample(served.url("status/403", "x.jpg") + PRESIGNED))
    with mmfeed.Loader(manifest, tokenizer=TOKENIZER, tensors="np", on_error="fail") as loader:
        with pytest.raises(Exception) as failed:
            list(loader)
        errors = loader.errors()
    text = str(failed.value) + json.dumps(errors)
    assert "X-Amz-Signature=REDACTED" in text
    assert not [s for s in SECRETS if s in text], text


def test_issue48_errors_never_quote_an_http_services_error_page(cli, served, tmp_path):
    # A remote manifest names an internal service that answers 500 with an S3-shaped page holding a
    # secret: the Loader's errors, its exception and the CLI's report give the status and size only.
    import mmfeed

    url = served.url("internal", "x.jpg")
    body = "<Error><Code>INTERNAL-SECRET-48</Code><Message>db password INTERNAL-SECRET-48</Message></Error>"
    manifest = write_manifest(tmp_path / "m.jsonl", sample(url))
    with mmfeed.Loader(manifest, tokenizer=TOKENIZER, tensors="np", on_error="fail") as loader:
        with pytest.raises(Exception) as failed:
            list(loader)
        errors = loader.errors()
    text = str(failed.value) + json.dumps(errors)
    assert f"{url}: HTTP 500 (an answer of {len(body)} bytes, not shown)" in text, text
    assert "SECRET" not in text
    proc = subprocess.run(
        [cli, "run", manifest, "--tokenizer", TOKENIZER, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "HTTP 500 (an answer of" in proc.stdout + proc.stderr and "SECRET" not in proc.stdout + proc.stderr
