"""The fetch engine against nginx with injected latency and faults: every request ends with the
right bytes or a named error, none lost, none hung."""
import hashlib
import re

from conftest import run_fetch


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


def test_two_thousand_requests_with_ten_percent_faults_all_accounted_for(cli, nginx, object_dir):
    files = objects(object_dir)
    rc, report = run_fetch(cli, "--checksums", "--repeat", "10", "--max-attempts", "10",
                           "--first-byte-timeout", "1000", "--stall-timeout", "1000", "--inflight", "64",
                           *[nginx.url("faulty", f.name) + "?p=0.1" for f in files])
    assert report["objects"] == 2000
    assert rc == 0, report["failures"][:5]
    assert report["ok"] == 2000
    # About 10% of first attempts fail, each in one of six ways; every retry ended byte-exact.
    assert 100 <= report["retries"] <= 400, report["retries"]
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
    assert "HTTP 503 SlowDown: Please reduce your request rate. (after 3 attempts)" in failure["error"]
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
    rc, report = run_fetch(cli, "--checksums", "--part-size", "250000", "--max-attempts", "10",
                           "--first-byte-timeout", "1000", "--stall-timeout", "1000",
                           nginx.url("faulty", "big.bin") + "?p=0.2")
    assert rc == 0, report["failures"]
    assert report["results"][0]["sha256"] == sha(object_dir / "big.bin")


def test_answers_for_other_bytes_than_asked_are_refused(cli, nginx, object_dir):
    # Well-formed 206 answers for the wrong bytes must fail the object, never hand back short or
    # shifted data: half the probe's range (the object fits in one part), parts served from offset
    # 0, and parts of another version of the object (a new ETag each time, If-Match ignored).
    size = (object_dir / "big.bin").stat().st_size
    cases = [("short", str(2 * size), "206 answer for other bytes than asked"),
             ("zero", "250000", "206 answer for other bytes than asked"),
             ("etag", "250000", "the object changed during the fetch (ETag")]
    for wrong, part_size, expected in cases:
        rc, report = run_fetch(cli, "--part-size", part_size, "--max-attempts", "3",
                               nginx.url("faulty", "big.bin") + f"?wrong={wrong}")
        assert rc == 1 and report["ok"] == 0, (wrong, report)
        assert expected in report["failures"][0]["error"], (wrong, report["failures"])
        if wrong == "zero":  # the probe's range starts at 0 and passes; the later parts fail, counted alone
            assert re.search(r"\(part \d+ of 20, after 3 attempts of it; \d+ requests in all\)",
                             report["failures"][0]["error"]), report["failures"]


def test_empty_object(cli, nginx):
    rc, report = run_fetch(cli, "--checksums", nginx.url("ok", "empty.bin"))
    assert rc == 0 and report["results"][0]["bytes"] == 0


def test_hedging_reissues_stragglers_and_stays_exact(cli, nginx, object_dir):
    files = objects(object_dir)
    rc, report = run_fetch(cli, "--checksums", "--hedge", "0.5", "--hedge-min-ms", "1", "--inflight", "32",
                           *[nginx.url("slow", f.name) for f in files])
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
    from mmfeed import datagen

    datagen.generate(tmp_path, samples=4, seed=9, max_megapixels=0.3, workers=1)
    rc, report = run_fetch(cli, "--from-manifest", tmp_path / "manifest.jsonl")
    images = len(list((tmp_path / "images").iterdir()))
    assert rc == 0 and report["ok"] == images


def test_manifest_errors_name_the_line(cli, tmp_path):
    import subprocess

    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"id": "a", "messages": []}\n{"id": "b", "messages": [\n')
    run = subprocess.run([cli, "fetch", "--from-manifest", manifest], capture_output=True, text=True)
    assert run.returncode == 2
    assert "m.jsonl:2: malformed JSON line" in run.stderr


def test_https_with_a_ca_bundle_and_refusal_without(cli, nginx, object_dir):
    f = objects(object_dir)[5]
    url = f"https://127.0.0.1:{nginx.tls_port}/ok/{f.name}"
    rc, report = run_fetch(cli, "--checksums", "--ca-bundle", nginx.certificate, url)
    assert rc == 0 and report["results"][0]["sha256"] == sha(f)
    rc, report = run_fetch(cli, url)
    assert rc == 1 and report["errors"] == {"permission_denied": 1} and report["retries"] == 0
    assert "TLS certificate not trusted" in report["failures"][0]["error"]
