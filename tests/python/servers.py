"""Real servers for the storage tests, started on free loopback ports and stopped afterwards:
nginx serving objects with injected latency, bandwidth limits and faults (tests/support/objectstore.py,
shared with the benchmark), and moto's S3 server with signature checking enforced."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from objectstore import Nginx, free_port, rewrite_images, s3_env, stop_process, wait_for_port  # noqa: F401


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

    def start(self) -> MotoS3:
        env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT="3", MOTO_ALLOW_NONEXISTENT_REGION="true")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.proc, "moto server")
        import boto3

        iam = boto3.client(
            "iam",
            endpoint_url=self.endpoint,
            region_name=self.REGION,
            aws_access_key_id="bootstrap",
            aws_secret_access_key="bootstrap",
        )
        iam.create_user(UserName="mmfeed")
        key = iam.create_access_key(UserName="mmfeed")["AccessKey"]
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
        iam.put_user_policy(UserName="mmfeed", PolicyName="all", PolicyDocument=json.dumps(policy))
        self.access_key, self.secret_key = key["AccessKeyId"], key["SecretAccessKey"]
        return self

    def client(self):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.REGION,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
        )

    def env(self, secret: str | None = None) -> dict:
        """Environment for the mmfeed CLI: this server and its credentials (or a wrong secret)."""
        return s3_env(self.endpoint, self.access_key, secret or self.secret_key, self.REGION)

    def stop(self) -> None:
        stop_process(self.proc)
