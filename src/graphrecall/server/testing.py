"""Run the HTTP API for tests, examples and load tests: in a thread (same process) or as a child process.

Both bind loopback only. The thread form shares the caller's ``Memory`` (so a test can inspect the store directly);
the process form is the real thing (``python -m graphrecall.server``), needed where a test kills the server.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import TracebackType

import httpx
import uvicorn
from fastapi import FastAPI


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve_in_thread(app: FastAPI, *, host: str = "127.0.0.1", log_level: str = "warning") -> Iterator[str]:
    """Serve ``app`` on a fresh loopback port in a daemon thread; yields the base URL; stops on exit."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level=log_level, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            sock.close()
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


class ServerProcess:
    """``python -m graphrecall.server`` (or, with ``cli=True``, ``graphrecall serve``) as a child process on a free
    loopback port. ``embedder``: a ``--embedder`` value of the chosen command."""

    def __init__(
        self,
        root: Path,
        *,
        extra_args: Sequence[str] = (),
        embedder: str | None = None,
        log_path: Path | None = None,
        port: int | None = None,
        env: dict[str, str] | None = None,
        cli: bool = False,
    ) -> None:
        self.root = root
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        command = ["graphrecall", "serve"] if cli else ["graphrecall.server"]
        embedder = embedder or ("hashing" if cli else "hashing:64")
        self.args = [
            sys.executable,
            "-m",
            *command,
            "--root",
            str(root),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--embedder",
            embedder,
            *extra_args,
        ]
        self.log_path = log_path or root.parent / f"server-{self.port}.log"
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60.0) -> ServerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"server not ready after {timeout}s: {self.log()[-2000:]}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown hooks, no flush, what a crash or an OOM kill looks like."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM and wait (graceful: uvicorn drains, the store closes)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def nginx_binary() -> str | None:
    """The ``nginx`` executable, also where root's PATH has it but a user's does not (Debian: /usr/sbin)."""
    return shutil.which("nginx", path=f"{os.environ.get('PATH', '')}{os.pathsep}/usr/sbin{os.pathsep}/sbin")


class NginxProcess:
    """nginx in the foreground running ``config`` (what ``graphrecall shard-config`` writes), with its pid file,
    logs and temp files under ``prefix``, so it needs no system paths and leaves nothing behind. ``url``: where the
    config listens; ready when ``{url}/healthz`` answers 200. As root the workers run as root too: the default
    worker user (nobody) cannot enter a private temporary directory."""

    def __init__(self, config: str, prefix: Path, url: str) -> None:
        binary = nginx_binary()
        if binary is None:
            raise RuntimeError("no nginx binary on PATH or in /usr/sbin")
        self.prefix = prefix
        self.url = url
        directives = "daemon off;" + (" user root;" if os.geteuid() == 0 else "")
        self.args = [binary, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", directives]
        self.config = config
        self.proc: subprocess.Popen[bytes] | None = None

    def log(self) -> str:
        path = self.prefix / "nginx.out"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self, timeout: float = 15.0) -> NginxProcess:
        self.prefix.mkdir(parents=True, exist_ok=True)
        (self.prefix / "nginx.conf").write_text(self.config)
        out = (self.prefix / "nginx.out").open("ab")
        self.proc = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
        out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited with {self.proc.returncode}: {self.log()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200:
                    return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx not ready after {timeout}s: {self.log()[-2000:]}")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM (nginx's fast shutdown; the master stops its workers), SIGKILL if it lingers."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)

    def __enter__(self) -> NginxProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
