"""Real servers for the storage tests, started on free loopback ports and stopped afterwards:
nginx (with its Lua module) serving objects with injected latency, bandwidth limits and faults,
and moto's S3 server with signature checking enforced."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

SERVERS_DIR = Path(__file__).resolve().parents[1] / "servers"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, what: str, log: Path | None = None,
                  timeout: float = 30.0) -> None:
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
    """nginx serving `root` under /ok/, /slow/, /limited/, /faulty/, /stall/ and /status/N/."""

    def __init__(self, root: Path, workdir: Path):
        self.root = Path(root)
        self.workdir = Path(workdir)
        self.port = free_port()
        self.tls_port = free_port()
        self.proc: subprocess.Popen | None = None

    @property
    def certificate(self) -> Path:
        return self.workdir / "cert.pem"

    def start(self) -> "Nginx":
        self.workdir.mkdir(parents=True, exist_ok=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
                        "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                        str(self.workdir / "key.pem"), "-out", str(self.certificate)],
                       check=True, capture_output=True)
        text = (SERVERS_DIR / "nginx.conf.in").read_text()
        user = "user root root;" if os.geteuid() == 0 else ""
        for key, value in {"@PREFIX@": str(self.workdir), "@PORT@": str(self.port), "@TLSPORT@": str(self.tls_port),
                           "@ROOT@": str(self.root), "@USER@": user,
                           "@SERVERS@": str(SERVERS_DIR)}.items():
            text = text.replace(key, value)
        conf = self.workdir / "nginx.conf"
        conf.write_text(text)
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        self.proc = subprocess.Popen([nginx, "-c", str(conf), "-p", str(self.workdir)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for_port(self.port, self.proc, "nginx", self.workdir / "error.log")
        return self

    def url(self, location: str, name: str) -> str:
        return f"http://127.0.0.1:{self.port}/{location}/{name}"

    def stop(self) -> None:
        stop_process(self.proc)


class MotoS3:
    """moto's S3 server with SigV4 checking on: a few unauthenticated IAM calls create a user
    with an access key and an allow-all policy, after which every request must be signed by
    that key."""

    REGION = "us-east-1"

    def __init__(self):
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.access_key = self.secret_key = None

    def start(self) -> "MotoS3":
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3", MOTO_ALLOW_NONEXISTENT_REGION="true")
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                      "-p", str(self.port)], env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.proc, "moto server")
        import boto3

        iam = boto3.client("iam", endpoint_url=self.endpoint, region_name=self.REGION,
                           aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap")
        iam.create_user(UserName="mmfeed")
        key = iam.create_access_key(UserName="mmfeed")["AccessKey"]
        policy = {"Version": "2012-10-17",
                  "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="mmfeed", PolicyName="all", PolicyDocument=json.dumps(policy))
        self.access_key, self.secret_key = key["AccessKeyId"], key["SecretAccessKey"]
        return self

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.REGION,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key)

    def env(self, secret: str | None = None) -> dict:
        """Environment for the mmfeed CLI: this server and its credentials (or a wrong secret)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        env.update(AWS_ACCESS_KEY_ID=self.access_key, AWS_SECRET_ACCESS_KEY=secret or self.secret_key,
                   AWS_REGION=self.REGION, AWS_ENDPOINT_URL=self.endpoint,
                   AWS_CONFIG_FILE="/nonexistent", AWS_SHARED_CREDENTIALS_FILE="/nonexistent")
        return env

    def stop(self) -> None:
        stop_process(self.proc)
