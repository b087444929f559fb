"""The fetch engine against nginx with injected latency and faults: every request ends with the
right bytes or a named error, none lost, none hung."""

import hashlib
import json
import os
import re
import subprocess
import tempfile
import time
import uuid

from conftest import run_fetch

# faulty.lua's ways to fail a request, each a retryable failure (stall and slow need the client's
# stall and first-byte deadlines below 5 s).
FAULTS = ["slowdown", "500", "truncate", "reset", "stall", "slow"]


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def objects(object_dir):
    return sorted(object_dir.glob("obj-*.bin"))


def test_plain_objects_arrive_byte_exact(cli, nginx, object_dir):
    files = objects(object_dir)[:50]
    rc, report = run_fetch(cli, "--checksums", *[nginx.url("ok", f.name) for f in files])
    assert rc == 0 and report["ok"] == 50 and report["failed"] == 0
    got = {r["uri"].rsplit("/", 1)[1]: r["sha256"] for r in report["results"]}
    assert got == {f.name: sha(f) for f in files}
    assert report["retries"] == 0


def test_two_thousand_requests_with_faults_all_accounted_for(cli, nginx, object_dir):
    # Each of 200 objects is fetched 10 times under its own URL; the k-th of those 2000 URLs meets
    # 0 to 2 faults (every way but the 5 s ones, which have their own test), then is served.
    files = objects(object_dir)
    run = uuid.uuid4().hex  # a fresh count of requests per URL on the session's nginx
    quick = [f for f in FAULTS if f not in ("stall", "slow")]
    urls, faults = [], 0
    for r in range(10):
        for i, f in enumerate(files):
            k = r * len(files) + i
            kinds = [quick[(k + j) % len(quick)] for j in range(k % 3)]
            faults += len(kinds)
            urls.append(nginx.url("faulty", f.name) + f"?faults={','.join(kinds)}&run={run}-{r}")
    rc, report = run_fetch(cli, "--checksums", "--max-attempts", "3", "--inflight", "64", *urls)
    assert report["objects"] == 2000
    assert rc == 0, report["failures"][:5]
    assert report["ok"] == 2000
    assert report["retries"] == faults == 1999  # each fault cost one retry; every retry ended byte-exact
    expected = {f.name: sha(f) for f in files}
    counts = {}
    for r in report["results"]:
        name = r["uri"].rsplit("/", 1)[1].split("?")[0]
        assert r["sha256"] == expected[name], name
        counts[name] = counts.get(name, 0) + 1
    assert set(counts.values()) == {10}


def test_404_is_final_at_once_and_names_the_uri(cli, nginx):
    url = nginx.url("status/404", "missing.jpg")
    rc, report = run_fetch(cli, url)
    assert rc == 1 and report["failed"] == 1
    failure = report["failures"][0]
    assert failure["uri"] == url and failure["attempts"] == 1
    assert "HTTP 404" in failure["error"] and url in failure["error"]
    assert report["errors"] == {"not_found": 1} and report["retries"] == 0


def test_501_is_final_at_once(cli, nginx):
    rc, report = run_fetch(cli, "--max-attempts", "3", nginx.url("status/501", "x.jpg"))
    assert rc == 1 and report["failures"][0]["attempts"] == 1 and report["retries"] == 0


def test_slowdown_is_retried_then_reported(cli, nginx):
    rc, report = run_fetch(cli, "--max-attempts", "3", nginx.url("status/503", "x.jpg"))
    assert rc == 1
    failure = report["failures"][0]
    assert failure["attempts"] == 3 and report["retries"] == 2
    # An S3-shaped error page from a plain http(s) server is not read (issue 48): only its size.
    assert "HTTP 503 (an answer of 125 bytes, not shown) (after 3 attempts)" in failure["error"]
    assert report["errors"] == {"unavailable": 1}


def test_stalled_body_hits_the_low_speed_limit(cli, nginx):
    rc, report = run_fetch(cli, "--max-attempts", "2", "--stall-timeout", "1000", nginx.url("stall", "obj-001.bin"))
    assert rc == 1 and report["errors"] == {"timeout": 1}
    assert report["failures"][0]["attempts"] == 2
    assert "stalled: no data for 1000 ms after" in report["failures"][0]["error"]


def test_slow_first_byte_hits_its_deadline(cli, nginx):
    rc, report = run_fetch(cli, "--max-attempts", "2", "--first-byte-timeout", "5", nginx.url("slow", "obj-002.bin"))
    assert rc == 1 and report["errors"] == {"timeout": 1}
    assert "first-byte deadline of 5 ms" in report["failures"][0]["error"]


def test_large_object_arrives_in_parallel_parts(cli, nginx, object_dir):
    rc, report = run_fetch(cli, "--checksums", "--part-size", "1000000", nginx.url("ok", "big.bin"))
    assert rc == 0
    assert report["results"][0]["sha256"] == sha(object_dir / "big.bin")
    assert report["requests"] == 5  # the first part learns the size, four more follow


def test_parts_survive_faults(cli, nginx, object_dir):
    # The object's first requests (the probe, then parts) fail once in each way, one after another.
    url = nginx.url("faulty", "big.bin") + f"?faults={','.join(FAULTS)}&run={uuid.uuid4().hex}"
    rc, report = run_fetch(
        cli,
        "--checksums",
        "--part-size",
        "250000",
        "--max-attempts",
        "3",
        "--first-byte-timeout",
        "1000",
        "--stall-timeout",
        "1000",
        url,
    )
    assert rc == 0, report["failures"]
    assert report["results"][0]["sha256"] == sha(object_dir / "big.bin")
    assert report["retries"] == len(FAULTS)


def test_answers_for_other_bytes_than_asked_are_refused(cli, nginx, object_dir):
    # Well-formed 206 answers for the wrong bytes must fail the object, never hand back short or
    # shifted data: half the probe's range (the object fits in one part), parts served from offset
    # 0, and parts of another version of the object (a new ETag each time, If-Match ignored).
    size = (object_dir / "big.bin").stat().st_size
    cases = [
        ("short", str(2 * size), "206 answer for other bytes than asked"),
        ("zero", "250000", "206 answer for other bytes than asked"),
        ("etag", "250000", "the object changed during the fetch (ETag"),
    ]
    for wrong, part_size, expected in cases:
        rc, report = run_fetch(
            cli, "--part-size", part_size, "--max-attempts", "3", nginx.url("faulty", "big.bin") + f"?wrong={wrong}"
        )
        assert rc == 1 and report["ok"] == 0, (wrong, report)
        assert expected in report["failures"][0]["error"], (wrong, report["failures"])
        if wrong == "zero":  # the probe's range starts at 0 and passes; the later parts fail, counted alone
            assert re.search(
                r"\(part \d+ of 20, after 3 attempts of it; \d+ requests in all\)", report["failures"][0]["error"]
            ), report["failures"]


def run_fetch_measured(cli, *args, timeout=120):
    """Runs `mmfeed fetch --json ...`; returns (exit status, report, peak resident bytes of that
    process alone, from its own rusage)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen([str(cli), "fetch", "--json", *map(str, args)], stdout=out, stderr=err)
        deadline = time.monotonic() + timeout  # generous: only a hang reaches it
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() > deadline:
                proc.kill()
                os.wait4(proc.pid, 0)
                raise AssertionError(f"mmfeed fetch {args} did not finish within {timeout} s")
            time.sleep(0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        text = out.read()
        if not text.strip():
            raise AssertionError(f"mmfeed fetch printed nothing (exit {proc.returncode}): {err.read()}")
        return proc.returncode, json.loads(text), usage.ru_maxrss * 1024


def test_empty_object(cli, nginx):
    rc, report = run_fetch(cli, "--checksums", nginx.url("ok", "empty.bin"))
    assert rc == 0 and report["results"][0]["bytes"] == 0


def test_hedging_reissues_stragglers_and_stays_exact(cli, nginx, object_dir):
    files = objects(object_dir)
    rc, report = run_fetch(
        cli,
        "--checksums",
        "--hedge",
        "0.5",
        "--hedge-min-ms",
        "1",
        "--inflight",
        "32",
        *[nginx.url("slow", f.name) for f in files],
    )
    assert rc == 0 and report["ok"] == 200
    assert report["hedges"] > 0
    assert report["requests"] == 200 + report["hedges"]
    expected = {f.name: sha(f) for f in files}
    assert all(r["sha256"] == expected[r["uri"].rsplit("/", 1)[1]] for r in report["results"])


def test_connection_refused_is_retried_then_an_io_error(cli):
    from servers import free_port

    url = f"http://127.0.0.1:{free_port()}/x.bin"
    rc, report = run_fetch(cli, "--max-attempts", "2", url)
    assert rc == 1 and report["errors"] == {"io_error": 1}
    assert url in report["failures"][0]["error"]


def test_local_files_and_missing_ones(cli, object_dir):
    f = objects(object_dir)[3]
    rc, report = run_fetch(cli, "--checksums", f, object_dir / "nope.bin")
    assert rc == 1 and report["ok"] == 1
    assert report["results"][0]["sha256"] == sha(f)
    assert report["errors"] == {"not_found": 1}
    assert "nope.bin: cannot open: No such file or directory" in report["failures"][0]["error"]


def test_malformed_uri_is_a_usage_error(cli):
    import subprocess

    run = subprocess.run([cli, "fetch", "gs://bucket/key"], capture_output=True, text=True)
    assert run.returncode == 2
    assert "unsupported URI scheme 'gs'" in run.stderr


def test_fetch_from_manifest(cli, tmp_path):
    import datagen

    datagen.generate(tmp_path, samples=4, seed=9, max_megapixels=0.3, workers=1)
    rc, report = run_fetch(cli, "--from-manifest", tmp_path / "manifest.jsonl")
    images = len(list((tmp_path / "images").iterdir()))
    assert rc == 0 and report["ok"] == images


def test_manifest_errors_name_the_line(cli, tmp_path):
    import subprocess

    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"id": "a", "messages": [{"role": "user", "content": "hi"}]}\n{"id": "b", "messages": [\n')
    run = subprocess.run([cli, "fetch", "--from-manifest", manifest], capture_output=True, text=True)
    assert run.returncode == 2
    assert "m.jsonl:2: malformed JSON" in run.stderr


def test_from_manifest_reads_what_the_loader_reads(cli, tmp_path):
    # Issue 17: one manifest reader. `--from-manifest` read plain local files only; it now takes a
    # gzip-compressed manifest and LLaVA-style samples as the Loader does.
    import gzip

    import datagen

    datagen.generate(tmp_path, samples=4, seed=9, max_megapixels=0.3, workers=1)
    lines = (tmp_path / "manifest.jsonl").read_text().splitlines()
    image = next(
        c["image"]
        for m in json.loads(lines[0])["messages"]
        if isinstance(m["content"], list)
        for c in m["content"]
        if c["type"] == "image"
    )
    lines.append(
        json.dumps(
            {
                "id": "llava",
                "image": image,
                "conversations": [{"from": "human", "value": "<image>\nWhat?"}, {"from": "gpt", "value": "!"}],
            }
        )
    )
    (tmp_path / "m.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    rc, plain = run_fetch(cli, "--from-manifest", tmp_path / "manifest.jsonl")
    rc_gz, packed = run_fetch(cli, "--from-manifest", tmp_path / "m.jsonl.gz")
    assert rc == rc_gz == 0 and packed["ok"] == plain["ok"] + 1


def test_https_with_a_ca_bundle_and_refusal_without(cli, nginx, object_dir):
    f = objects(object_dir)[5]
    url = f"https://127.0.0.1:{nginx.tls_port}/ok/{f.name}"
    rc, report = run_fetch(cli, "--checksums", "--ca-bundle", nginx.certificate, url)
    assert rc == 0 and report["results"][0]["sha256"] == sha(f)
    rc, report = run_fetch(cli, url)
    assert rc == 1 and report["errors"] == {"permission_denied": 1} and report["retries"] == 0
    assert "TLS certificate not trusted" in report["failures"][0]["error"]


MIB = 1 << 20


def test_issue15_sizes_over_the_limit_are_refused_before_memory_is_taken(cli, nginx, tmp_path):
    # A 200's Content-Length, a 206's Content-Range total and a local file's size are checked
    # against the limit (512 MiB by default) before memory is taken: a declared 100 GiB ended the
    # process with std::bad_alloc. The refusal is final, and the process stays as small as one
    # that fetched a 5 MB object.
    _, _, control = run_fetch_measured(cli, nginx.url("ok", "big.bin"))
    sparse = tmp_path / "sparse.bin"
    with open(sparse, "wb") as f:
        f.truncate(100 << 30)
    cases = [
        (nginx.url("huge", "declared"), "object of 107374182400 bytes (Content-Length)"),
        (nginx.url("huge", "ranged"), "object of 107374182400 bytes (Content-Range total)"),
        (f"file://{sparse}", "file of 107374182400 bytes"),
    ]
    for uri, declared in cases:
        rc, report, rss = run_fetch_measured(cli, "--max-attempts", "5", uri)
        assert rc == 1 and report["errors"] == {"resource_exhausted": 1} and report["retries"] == 0, report
        assert report["failures"][0]["error"] == (
            f"{uri}: {declared} exceeds the object size limit of 536870912 "
            "bytes (raise max_object_bytes, --max-object-bytes)"
        )
        assert rss < control + 64 * MIB, (uri, rss, control)


def test_issue15_a_body_without_a_length_is_refused_once_past_the_limit(cli, nginx):
    # An endless chunked body grew until memory ran out (4 GiB of it took 4.4 GB). It is refused as
    # soon as it passes the limit, and its buffer never outgrows the limit: at most the limit and
    # the smaller buffer it was copied from are held at once.
    _, _, control = run_fetch_measured(cli, nginx.url("ok", "big.bin"))
    url = nginx.url("huge", "chunked")
    for limit in (512 * MIB, 32 * MIB):
        args = [] if limit == 512 * MIB else ["--max-object-bytes", limit]
        rc, report, rss = run_fetch_measured(cli, *args, url)
        assert rc == 1 and report["errors"] == {"resource_exhausted": 1} and report["retries"] == 0, report
        assert re.fullmatch(
            re.escape(url) + r": object of \d+ bytes \(received so far, no length declared\) exceeds "
            f"the object size limit of {limit} bytes " + re.escape("(raise max_object_bytes, --max-object-bytes)"),
            report["failures"][0]["error"],
        ), report["failures"]
        assert rss < control + 2 * limit, (limit, rss, control)


def test_issue15_a_fifo_is_refused_at_once(cli, tmp_path):
    # A FIFO given as a local image blocked its reader until a writer came: `mmfeed fetch` hung,
    # whatever its --attempt-timeout. It is refused by name, by URI and through a manifest.
    fifo = tmp_path / "image.jpg"
    os.mkfifo(fifo)
    manifest = tmp_path / "manifest.jsonl"
    sample = {
        "id": "a",
        "messages": [
            {"role": "user", "content": [{"type": "image", "image": "image.jpg"}, {"type": "text", "text": "?"}]}
        ],
    }
    manifest.write_text(json.dumps(sample) + "\n")
    for args in (["--attempt-timeout", "2000", fifo], ["--from-manifest", manifest]):
        rc, report = run_fetch(cli, *args, timeout=60)  # generous: only a hang reaches it
        assert rc == 1 and report["errors"] == {"unsupported": 1}, report
        assert report["failures"][0]["error"] == f"file://{fifo}: cannot read: a FIFO, not a regular file"


def test_issue15_a_redirect_loop_is_final(cli, nginx):
    url = nginx.url("loop", "x.bin")
    rc, report = run_fetch(cli, "--max-attempts", "5", url)
    assert rc == 1 and report["errors"] == {"invalid_argument": 1} and report["retries"] == 0, report
    assert report["failures"][0]["attempts"] == 1
    assert report["failures"][0]["error"] == f"{url}: redirect loop: more than 5 redirects, the last to {url}"


def test_issue15_an_allocation_that_fails_is_that_objects_error(cli, nginx, tmp_path):
    # With the limit raised past what the address space allows, taking memory for a declared
    # 100 GiB fails: std::bad_alloc ended the process; now it is that object's error and the
    # others arrive.
    import resource

    sparse = tmp_path / "sparse.bin"
    with open(sparse, "wb") as f:
        f.truncate(100 << 30)

    def limit_address_space():
        resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))

    for uri in (nginx.url("huge", "declared"), f"file://{sparse}"):
        run = subprocess.run(
            [str(cli), "fetch", "--json", "--max-object-bytes", str(200 << 30), uri, nginx.url("ok", "obj-000.bin")],
            capture_output=True,
            text=True,
            timeout=120,
            preexec_fn=limit_address_space,
        )
        report = json.loads(run.stdout) if run.stdout.strip() else run.stderr
        assert run.returncode == 1 and report["ok"] == 1 and report["errors"] == {"resource_exhausted": 1}, report
        assert re.fullmatch(
            re.escape(uri) + r": out of memory for a (body|file) of 107374182400 bytes", report["failures"][0]["error"]
        ), report["failures"]
