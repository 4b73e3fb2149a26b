"""A real S3 API on 127.0.0.1: moto's server mode, for tests of ``s3://`` data dirs.

Use the module-scoped ``s3_server`` fixture (one server for the session, started by the first
module that asks, set in the environment for each module's tests; each test makes its own bucket
with ``s3_server.bucket()``)::

    from support.s3_server import s3_server  # noqa: F401 (fixture)

    def test_something(s3_server):
        url = s3_server.bucket()            # "s3://gf-test-1"
        ...                                  # s3fs finds the server through the environment

The fixture sets ``AWS_ENDPOINT_URL``, test credentials and the region in ``os.environ``
for the module's tests (and so for the subprocesses and Dask workers they start), and
restores the environment afterwards. ``s3_server.fs()`` is a fresh s3fs filesystem on it.
"""
from __future__ import annotations

import itertools
import json
import logging
import os
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from support.ports import free_port

#: Bucket numbers, for the whole test session: moto keeps its buckets in the process, so a second
#: module's server starts with the first one's buckets.
_BUCKETS = itertools.count(1)
#: IAM user numbers, for the whole test session (moto keeps its users in the process, as its buckets).
_USERS = itertools.count(1)
#: What the fixture puts in the environment (moto accepts any credentials).
ENVIRONMENT = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1"}



class LocalS3Server:
    """moto's threaded S3 server on a free port of 127.0.0.1 (see the module docstring)."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's server logs every request otherwise
        self.port = free_port()
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._session: Any = None
        self._session_pid: int | None = None

    @property
    def endpoint(self) -> str:
        """The server's URL, as ``AWS_ENDPOINT_URL`` holds it."""
        return f"http://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The variables a process needs to reach this server (credentials, region, endpoint)."""
        return {**ENVIRONMENT, "AWS_ENDPOINT_URL": self.endpoint}

    def start(self) -> LocalS3Server:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.stop()

    @contextmanager
    def checking_credentials(self) -> Iterator[None]:
        """Make the server check credentials and IAM policies in the block (moto accepts any otherwise)."""
        def reset_auth(count: bytes) -> None:
            request = urllib.request.Request(f"{self.endpoint}/moto-api/reset-auth", data=count, method="POST",
                                             headers={"Content-Type": "text/plain"})
            urllib.request.urlopen(request, timeout=30).read()

        reset_auth(b"0")
        try:
            yield
        finally:
            reset_auth(b"inf")

    def fs(self, **options: Any) -> Any:
        """A new s3fs filesystem on this server (not fsspec's cached instance: listings are not cached across calls).

        The filesystems of one process share one botocore session: a new session reads botocore's S3
        model again (JSON files of several MB, about 0.1 s), which took 30 s of a run of the suite.
        """
        import aiobotocore.session
        import s3fs

        if self._session_pid != os.getpid():  # a forked child makes its own
            self._session, self._session_pid = aiobotocore.session.AioSession(), os.getpid()
        return s3fs.S3FileSystem(skip_instance_cache=True, endpoint_url=self.endpoint, session=self._session,
                                 **options)

    def bucket(self, name: str | None = None) -> str:
        """Make a bucket (a new one per call unless ``name`` is given); return its ``s3://`` URL."""
        name = name or f"gf-test-{next(_BUCKETS)}"
        self.fs().mkdir(name)
        return f"s3://{name}"

    def user_denied_puts(self, bucket: str, pattern: str) -> dict[str, str]:
        """An IAM user who may do anything in ``bucket`` but put objects matching ``pattern`` (``*/manifest.json``);
        its storage options. Denials apply within `checking_credentials` only."""
        return self.user_denied(bucket, "s3:PutObject", pattern)

    def user_denied(self, bucket: str, action: str, pattern: str) -> dict[str, str]:
        """An IAM user who may do anything in ``bucket`` but ``action`` (``"s3:GetObject"``) on objects matching
        ``pattern``; its storage options. Denials apply within `checking_credentials` only."""
        import boto3

        iam = boto3.client("iam")
        name = f"user-{next(_USERS)}"
        iam.create_user(UserName=name)
        iam.put_user_policy(UserName=name, PolicyName="denied", PolicyDocument=json.dumps({
            "Version": "2012-10-17", "Statement": [
                {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
                {"Effect": "Deny", "Action": action, "Resource": f"arn:aws:s3:::{bucket[5:]}/{pattern}"},
            ]}))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return {"key": key["AccessKeyId"], "secret": key["SecretAccessKey"]}


@pytest.fixture(scope="session")
def s3_server_process() -> Iterator[LocalS3Server]:
    """moto's S3 server on 127.0.0.1 for the whole session (its first request costs a second or two: once).

    Declared in ``tests/conftest.py``; modules use `s3_server`, which puts it in the environment.
    """
    pytest.importorskip("moto.server", reason="moto[server] is in the test extra: pip install -e '.[test]'")
    pytest.importorskip("s3fs", reason="s3fs is in the test extra: pip install -e '.[test]'")
    server = LocalS3Server().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def s3_server(s3_server_process: LocalS3Server) -> Iterator[LocalS3Server]:
    """moto's S3 server on 127.0.0.1 (the session's) for one test module, with the environment pointing at it."""
    import s3fs

    server = s3_server_process
    saved = {name: os.environ.get(name) for name in server.environment()}
    os.environ.update(server.environment())
    s3fs.S3FileSystem.clear_instance_cache()  # fsspec's cached instance would still point at an earlier server
    try:
        yield server
    finally:
        s3fs.S3FileSystem.clear_instance_cache()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
