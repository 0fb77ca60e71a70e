"""A Ray cluster on this machine's loopback, started with the ``ray`` CLI: a head node, and more nodes on demand.

Shared by the one-vs-two-node benchmark (``benchmarks/ray_nodes.py``) and the cluster test
(``tests/integration/test_ray_batch.py``). Token authentication (on by default in recent Ray) is switched off for
the nodes and for this process, the driver: every node is this machine. ``ray stop --force`` runs on exit whatever
happened, and the driver's ``RAY_AUTH_MODE`` is put back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import TracebackType

from graphrecall.server.testing import free_port


def ray_cli() -> str:
    """The ``ray`` command of this interpreter's environment, else the one on PATH."""
    found = Path(sys.executable).with_name("ray")
    return str(found) if found.exists() else (shutil.which("ray") or "ray")


class LoopbackCluster:
    """``with LoopbackCluster(cpus=1) as c:`` starts the head node; ``c.add_node()`` another; ``c.address`` is what
    ``--ray`` takes. ``temp_dir`` keeps the cluster's sockets and logs apart from any other Ray on the machine;
    ``timeout`` bounds each ``ray`` command (None: no bound)."""

    def __init__(
        self, *, cpus: float = 1.0, temp_dir: Path | None = None, timeout: float | None = None
    ) -> None:
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp_dir = temp_dir
        self.timeout = timeout
        self.cli = ray_cli()
        self.node = [f"--num-cpus={cpus:g}", "--node-ip-address=127.0.0.1", "--disable-usage-stats"]
        self._old_auth: str | None = None

    def _ray(self, *args: str, check: bool = True) -> None:
        env = os.environ | {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
        subprocess.run([self.cli, *args], check=check, env=env, capture_output=True, timeout=self.timeout)

    def __enter__(self) -> LoopbackCluster:
        self._old_auth = os.environ.get("RAY_AUTH_MODE")
        os.environ["RAY_AUTH_MODE"] = "disabled"  # the driver (this process) too
        temp = [f"--temp-dir={self.temp_dir}"] if self.temp_dir is not None else []
        try:
            self._ray(
                "start", "--head", f"--port={self.port}", "--include-dashboard=false", *temp, *self.node
            )
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def add_node(self) -> None:
        self._ray("start", f"--address={self.address}", *self.node)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._ray("stop", "--force", check=False)
        if self._old_auth is None:
            os.environ.pop("RAY_AUTH_MODE", None)
        else:
            os.environ["RAY_AUTH_MODE"] = self._old_auth
