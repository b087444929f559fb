"""The latency-injecting object server of the benchmark and the storage tests: nginx (with its
Lua module) serving a directory on a free loopback port with injected first-byte delays,
bandwidth caps and faults, started and stopped by the caller. It answers plain HTTP GETs and,
path-style, S3 GetObject requests (signatures are not checked), so one server stands in for an
object store to boto3, urllib and mmfeed alike.

Example:
    with Nginx(root=data_dir, workdir=tmp / "nginx") as server:
        url = server.url("s3", "images/0.jpg")          # what boto3 or mmfeed would GET
        manifest = rewrite_images(data_dir / "manifest.jsonl",
                                  lambda ref: f"s3://s3/{ref}", tmp / "remote.jsonl")
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

SERVERS_DIR = Path(__file__).resolve().parent / "servers"


def free_ports(n: int) -> list[int]:
    """`n` distinct ports that were free: every socket stays bound until all are chosen, so the
    kernel cannot hand one port out twice."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def free_port() -> int:
    return free_ports(1)[0]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, log: Path | None = None, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            detail = log.read_text() if log and log.exists() else ""
            raise RuntimeError(f"{what} exited with {proc.returncode} before listening\n{detail}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout} s")


def stop_process(proc: subprocess.Popen | None) -> None:
    """Terminates a server process, killing it when it does not exit within 10 s."""
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def s3_env(endpoint: str, access_key: str, secret_key: str, region: str = "us-east-1") -> dict:
    """This process's environment with every AWS_ setting replaced by one S3 endpoint and key
    pair (no profiles, no instance metadata), for boto3 and mmfeed alike."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID=access_key,
        AWS_SECRET_ACCESS_KEY=secret_key,
        AWS_REGION=region,
        AWS_DEFAULT_REGION=region,
        AWS_CONFIG_FILE="/nonexistent",
        AWS_SHARED_CREDENTIALS_FILE="/nonexistent",
        AWS_EC2_METADATA_DISABLED="true",
    )
    return env


def rewrite_images(manifest: Path, image_ref, out: Path) -> Path:
    """Copies a JSONL manifest to `out` with each image reference r replaced by image_ref(r)."""
    lines = []
    for line in Path(manifest).read_text().splitlines():
        sample = json.loads(line)
        for m in sample["messages"]:
            for c in m["content"] if isinstance(m["content"], list) else []:
                if c["type"] == "image":
                    c["image"] = image_ref(c["image"])
        lines.append(json.dumps(sample, ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n")
    return out


class Nginx:
    """nginx serving `root` under /ok/, /slow/, /s3/, /limited/, /faulty/, /stall/ and /status/N/
    (tests/python and the benchmark say what each does; servers/nginx.conf.in defines them)."""

    def __init__(self, root: Path, workdir: Path):
        self.root = Path(root).resolve()
        self.workdir = Path(workdir).resolve()
        self.port, self.tls_port = free_ports(2)
        self.proc: subprocess.Popen | None = None

    @property
    def certificate(self) -> Path:
        return self.workdir / "cert.pem"

    def start(self) -> Nginx:
        self.workdir.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=127.0.0.1",
                "-addext",
                "subjectAltName=IP:127.0.0.1",
                "-keyout",
                str(self.workdir / "key.pem"),
                "-out",
                str(self.certificate),
            ],
            check=True,
            capture_output=True,
        )
        # A port chosen free may be taken by another process before nginx binds it: that start is
        # tried again on new ports, a few times.
        for attempt in range(3):
            if attempt:
                self.port, self.tls_port = free_ports(2)
            try:
                self._launch()
                break
            except RuntimeError as e:
                if attempt == 2 or "Address already in use" not in str(e):
                    raise
        return self

    def _launch(self) -> None:
        text = (SERVERS_DIR / "nginx.conf.in").read_text()
        user = "user root root;" if os.geteuid() == 0 else ""
        for key, value in {
            "@PREFIX@": str(self.workdir),
            "@PORT@": str(self.port),
            "@TLSPORT@": str(self.tls_port),
            "@ROOT@": str(self.root),
            "@USER@": user,
            "@SERVERS@": str(SERVERS_DIR),
        }.items():
            text = text.replace(key, value)
        conf = self.workdir / "nginx.conf"
        conf.write_text(text)
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen(
            [nginx, "-c", str(conf), "-p", str(self.workdir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        wait_for_port(self.port, self.proc, "nginx", self.workdir / "error.log")

    def url(self, location: str, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{location}/{name}"

    def stop(self) -> None:
        stop_process(self.proc)

    def __enter__(self) -> Nginx:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
