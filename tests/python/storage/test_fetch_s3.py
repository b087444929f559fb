"""The fetch engine against moto's S3 server with signature checking enforced: a request is
served only if mmfeed signed it exactly as S3 expects."""

import hashlib
import json
import random

import pytest
from conftest import run_fetch

BUCKET = "mmfeed-test"
SPECIAL_KEYS = [
    "plain.bin",
    "dir/with space.bin",
    "ünïcødé/中文/😀.bin",
    "a+b=c&d~e.bin",
    "quote'(paren)!*.bin",
    "deep/a/b/c/d/e.bin",
    "percent%20literal.bin",
    "dots/../not-a-path.bin",
]


@pytest.fixture(scope="module")
def bucket(moto_s3):
    s3 = moto_s3.client()
    s3.create_bucket(Bucket=BUCKET)
    rng = random.Random(7)
    contents = {}
    for key in SPECIAL_KEYS:
        contents[key] = rng.randbytes(rng.randint(10, 50_000))
    for i in range(23):
        contents[f"listing/item-{i:02d}.bin"] = rng.randbytes(100 + i)
    contents["large/six-megabytes.bin"] = rng.randbytes(6_000_000)
    contents["empty.bin"] = b""
    for key, body in contents.items():
        s3.put_object(Bucket=BUCKET, Key=key, Body=body)
    return contents


def digest(b):
    return hashlib.sha256(b).hexdigest()


def test_signed_gets_of_awkward_keys_are_accepted_and_exact(cli, moto_s3, bucket):
    uris = [f"s3://{BUCKET}/{k}" for k in SPECIAL_KEYS]
    rc, report = run_fetch(cli, "--checksums", *uris, env=moto_s3.env())
    assert rc == 0, report["failures"]
    got = {r["uri"]: r["sha256"] for r in report["results"]}
    assert got == {f"s3://{BUCKET}/{k}": digest(bucket[k]) for k in SPECIAL_KEYS}


def test_prefix_listing_follows_continuation_tokens(cli, moto_s3, bucket):
    rc, report = run_fetch(cli, "--checksums", "--list-page-size", "5", f"s3://{BUCKET}/listing/", env=moto_s3.env())
    assert rc == 0 and report["ok"] == 23
    expected = {f"s3://{BUCKET}/{k}": digest(v) for k, v in bucket.items() if k.startswith("listing/")}
    assert {r["uri"]: r["sha256"] for r in report["results"]} == expected


def test_large_object_by_ranged_parts(cli, moto_s3, bucket):
    rc, report = run_fetch(
        cli, "--checksums", "--part-size", "1048576", f"s3://{BUCKET}/large/six-megabytes.bin", env=moto_s3.env()
    )
    assert rc == 0, report["failures"]
    assert report["results"][0]["sha256"] == digest(bucket["large/six-megabytes.bin"])
    assert report["requests"] == 6


def test_empty_object(cli, moto_s3, bucket):
    rc, report = run_fetch(cli, "--checksums", f"s3://{BUCKET}/empty.bin", env=moto_s3.env())
    assert rc == 0, report["failures"]
    assert report["results"][0]["bytes"] == 0


def test_no_such_key_is_not_retried_and_names_the_uri(cli, moto_s3, bucket):
    rc, report = run_fetch(cli, f"s3://{BUCKET}/missing/key.jpg", env=moto_s3.env())
    assert rc == 1 and report["errors"] == {"not_found": 1} and report["retries"] == 0
    assert report["failures"][0]["error"] == (
        f"s3://{BUCKET}/missing/key.jpg: HTTP 404 NoSuchKey: The specified key does not exist."
    )


def test_wrong_secret_is_rejected_by_the_server_with_a_useful_message(cli, moto_s3, bucket):
    secret = "not-the-secret-Xy7"
    rc, report = run_fetch(cli, f"s3://{BUCKET}/plain.bin", env=moto_s3.env(secret=secret))
    assert rc == 1 and report["errors"] == {"permission_denied": 1}
    message = report["failures"][0]["error"]
    assert "SignatureDoesNotMatch" in message
    assert "credentials" in message and "region [us-east-1]" in message and moto_s3.endpoint in message
    assert secret not in message and moto_s3.secret_key not in message


def test_listing_with_wrong_secret_fails_cleanly(cli, moto_s3, bucket):
    import subprocess

    env = moto_s3.env(secret="nope-nope")
    run = subprocess.run([cli, "fetch", f"s3://{BUCKET}/listing/"], env=env, capture_output=True, text=True)
    assert run.returncode == 1
    assert "ListObjectsV2: HTTP 403" in run.stdout and "nope-nope" not in run.stdout + run.stderr
    assert f"access key {env['AWS_ACCESS_KEY_ID']}, from environment" in run.stdout  # as a GET's 403 says
    # A prefix that cannot be listed is one failure of the report; the other URIs are fetched.
    run = subprocess.run(
        [cli, "fetch", "--json", f"s3://{BUCKET}/listing/", "s3://no-such-bucket/some/"]
        + [f"s3://{BUCKET}/listing/item-{i:02d}.bin" for i in range(3)],
        env=moto_s3.env(),
        capture_output=True,
        text=True,
    )
    report = json.loads(run.stdout)
    assert run.returncode == 1 and report["failed"] == 1 and report["ok"] > 3, report
    assert report["failures"][0]["uri"] == "s3://no-such-bucket/some/"
    assert "ListObjectsV2: HTTP 404 NoSuchBucket" in report["failures"][0]["error"]


def test_issue15_a_repeated_continuation_token_ends_the_listing(cli, nginx):
    # A server whose every ListObjectsV2 page names the same continuation token was asked for the
    # same page for ever (10,000 requests in 20 s). The listing stops with an error naming the prefix
    # and the token.
    from servers import s3_env

    env = s3_env(f"http://127.0.0.1:{nginx.port}", "unused", "unused")
    rc, report = run_fetch(
        cli, "--no-sign-request", "--path-style", "s3://listing-loop/train/", env=env, timeout=60
    )  # generous: only a loop reaches it
    assert rc == 1 and report["errors"] == {"corrupt_data": 1} and report["ok"] == 0, report
    assert report["failures"][0]["error"] == (
        "s3://listing-loop/train/: ListObjectsV2: the server repeated the "
        "continuation token 'same-token' (page 2); listing stopped, it would "
        "never end"
    )


def test_issue15_an_object_uri_without_a_key_is_refused(cli, moto_s3, bucket, tmp_path):
    # "s3://bucket/" as an image fetched the bucket's listing and handed its XML on as the image.
    manifest = tmp_path / "manifest.jsonl"
    sample = {"id": "a", "messages": [{"role": "user", "content": [{"type": "image", "image": f"s3://{BUCKET}/"}]}]}
    manifest.write_text(json.dumps(sample) + "\n")
    rc, report = run_fetch(cli, "--from-manifest", manifest, env=moto_s3.env())
    assert rc == 1 and report["errors"] == {"invalid_argument": 1} and report["requests"] == 0, report
    assert report["failures"][0]["error"].startswith(f"s3://{BUCKET}/: an S3 object URI needs a key")
