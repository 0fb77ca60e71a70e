"""Map a function over work items here, or as Ray tasks on a cluster, with the same results either way.

Batch work (benchmark questions, extraction of many scopes) is a list of independent items; one machine runs them
one after another, a Ray cluster runs them side by side. ``run_map`` is the one place that knows the difference, so
every caller keeps a single loop: it filters out the items an earlier run already wrote, hands the rest to
``run_map`` and writes each ``Outcome`` as it arrives (results come in completion order, not item order, on a
cluster), which keeps a Ray run exactly as resumable as a local one.

Ray is optional (``pip install 'graphrecall[ray]'``) and imported only when a ``RayOptions`` is given: a local run
never loads it. What travels to a worker is the function and the item, pickled: callers pass module-level
functions over plain arguments (paths, specs, ids), never live objects (a ``Memory``, an open file), and the worker
rebuilds what it needs, keeping it for the next task on the same process through ``worker_state``.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from graphrecall.cli_common import non_negative_int
from graphrecall.errors import NotAvailable

T = TypeVar("T")
R = TypeVar("R")

INSTALL_HINT = "pip install 'graphrecall[ray]'"
# Environment that a worker must see as the driver does: offline model loading and the model cache (a worker that
# tried to download the model would hang on a machine without internet), graphrecall's own settings, the LLM
# providers' keys and hosts, and where the code is. Names or prefixes; only those set in the driver travel.
FORWARDED_ENV = (
    "HF_",
    "TRANSFORMERS_",
    "SENTENCE_TRANSFORMERS_HOME",
    "GRAPHRECALL_",
    "OPENAI_",
    "ANTHROPIC_",
    "OLLAMA_HOST",
    "TOKENIZERS_PARALLELISM",
)


class RayNotInstalled(NotAvailable):
    """``--ray`` was given but the ``ray`` package cannot be imported."""


@dataclass(frozen=True)
class RayOptions:
    """Where and how to run tasks on Ray.

    ``address`` is what ``ray.init`` gets: ``None`` joins the Ray that ``RAY_ADDRESS`` names or that ``ray start``
    last started on this machine, else starts one for the run; ``"auto"`` joins the cluster this machine is a
    node of (an error if none); ``host:port`` a cluster's head node. ``num_cpus`` is each task's CPU budget (Ray runs as many tasks per node as fit), and
    ``max_retries`` how often a task is run again after its worker died or it raised."""

    address: str | None = None
    num_cpus: float = 1.0
    max_retries: int = 2
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome(Generic[T, R]):
    """One finished item: its ``value``, or the ``error`` (``"Type: message"``) left after the retries, and
    ``where`` it ran (``host:pid``, with the Ray node id on a cluster)."""

    item: T
    value: R | None
    error: str | None = None
    where: str = ""
    node_id: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


# -- command line -----------------------------------------------------------------------------------------------------
def add_ray_arguments(p: argparse.ArgumentParser, *, what: str = "items") -> None:
    """``--ray [ADDRESS]``, ``--ray-cpus N`` and ``--ray-retries N``, worded for the caller's ``what``."""
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help=f"run the {what} as Ray tasks (pip install 'graphrecall[ray]'): no ADDRESS joins the Ray running on "
        "this machine or starts one, 'auto' joins the cluster this machine belongs to, HOST:PORT a cluster's head",
    )
    p.add_argument(
        "--ray-cpus",
        type=_positive_float,
        default=1.0,
        metavar="N",
        help="CPUs each Ray task asks for (default 1; also its thread count)",
    )
    p.add_argument(
        "--ray-retries",
        type=non_negative_int,
        default=2,
        metavar="N",
        help="times a failed Ray task is run again (default 2)",
    )


def options_from_args(
    args: argparse.Namespace, parser: argparse.ArgumentParser | None = None
) -> RayOptions | None:
    """The ``RayOptions`` of parsed ``add_ray_arguments`` options, or ``None`` for a local run (no ``--ray``).

    With ``--ray`` and no Ray installed this is where the run stops, before any data is read: a usage error of
    ``parser`` when given (exit 2, the install command in the message), else ``RayNotInstalled``."""
    if getattr(args, "ray", None) is None:
        return None
    try:
        import_ray()
    except RayNotInstalled as e:
        if parser is not None:
            parser.error(str(e))
        raise
    address = args.ray.strip() or None
    return RayOptions(address=address, num_cpus=args.ray_cpus, max_retries=args.ray_retries)


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


# -- the map ----------------------------------------------------------------------------------------------------------
def run_map(
    fn: Callable[[T], R],
    items: Sequence[T],
    *,
    ray: RayOptions | None = None,
    concurrency: int = 1,
    desc: str = "tasks",
    progress: bool = True,
) -> Iterator[Outcome[T, R]]:
    """``fn`` over ``items``, one ``Outcome`` per item as each finishes.

    Without ``ray``: in this process, in item order when ``concurrency`` is 1, else on that many threads. With
    ``ray``: every item is a Ray task with the options' CPU budget and retries; ``fn`` and the items must pickle.
    A failing item never stops the others: its ``Outcome`` carries the error and the caller decides (record it,
    retry it on resume, fail the run at the end). ``progress`` shows a bar on stderr (tqdm, else a plain line)."""
    if ray is None:
        yield from _run_local(fn, items, concurrency=concurrency, desc=desc, progress=progress)
    else:
        yield from _run_ray(fn, items, ray, desc=desc, progress=progress)


def _here() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _describe(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


def _run_local(
    fn: Callable[[T], R], items: Sequence[T], *, concurrency: int, desc: str, progress: bool
) -> Iterator[Outcome[T, R]]:
    def one(item: T) -> Outcome[T, R]:
        try:
            return Outcome(item, fn(item), where=_here())
        except Exception as e:  # one failing item must not stop the run: the caller sees the error
            return Outcome(item, None, _describe(e), where=_here())

    with _Progress(len(items), desc, enabled=progress) as bar:
        if concurrency <= 1:
            for item in items:
                out = one(item)
                bar.done(out)
                yield out
            return
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            futures = [pool.submit(one, item) for item in items]
            for fut in as_completed(futures):
                out = fut.result()
                bar.done(out)
                yield out


def import_ray() -> Any:
    """The ``ray`` module, or ``RayNotInstalled`` saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise RayNotInstalled(
            f"--ray needs the ray package, which is not installed: {INSTALL_HINT} ({e})"
        ) from None
    return ray


def worker_env(fn: Callable[..., Any], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment variables every worker gets (Ray ``runtime_env``): the driver's ``FORWARDED_ENV``
    variables and a ``PYTHONPATH`` that finds graphrecall and ``fn``'s package where the driver found them, so
    a worker imports the same code (on other machines, the same paths must hold the same checkout)."""
    env = {k: v for k, v in os.environ.items() if any(k == p or k.startswith(p) for p in FORWARDED_ENV)}
    paths: list[str] = []
    for module in (fn_module(fn), "graphrecall"):
        top = sys.modules.get(module.split(".")[0])
        file = getattr(top, "__file__", None)
        if file:  # a package's __init__.py sits one level below the path entry, a plain module right in it
            paths.append(str(Path(file).resolve().parents[1 if hasattr(top, "__path__") else 0]))
    paths += [str(Path(p).resolve()) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.update(extra or {})
    return env


def fn_module(fn: Callable[..., Any]) -> str:
    """The module that defines ``fn`` (through ``functools.partial``)."""
    inner = getattr(fn, "func", fn)
    return str(getattr(inner, "__module__", "") or "")


def _call(fn: Callable[[T], R], item: T) -> tuple[R, str, str]:
    """What runs in a Ray worker: ``fn(item)`` and where it ran."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    return fn(item), _here(), str(node)


def connect(options: RayOptions, *fns: Callable[..., Any]) -> bool:
    """Connect this process to Ray as ``options`` say (starting a local Ray when the address is ``None``), with
    ``worker_env`` for ``fns`` as every worker's environment; ``True`` when this call connected, ``False`` when
    the process already was (then its first connection's settings hold). A caller that maps several times can
    connect once; ``run_map`` connects, and disconnects afterwards, only when nobody has."""
    ray = import_ray()
    if ray.is_initialized():
        return False
    env: dict[str, str] = {}
    for fn in fns:
        found = worker_env(fn, options.env)
        paths = [*env.get("PYTHONPATH", "").split(os.pathsep), *found.pop("PYTHONPATH").split(os.pathsep)]
        env |= found
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
    kwargs: dict[str, Any] = {"runtime_env": {"env_vars": env}, "logging_level": "WARNING"}
    if options.address is None and not os.environ.get("RAY_ADDRESS"):
        kwargs["include_dashboard"] = (
            False  # if Ray starts one for the run: no dashboard (ignored when joining)
        )
    ray.init(address=options.address, **kwargs)
    return True


def _run_ray(
    fn: Callable[[T], R], items: Sequence[T], options: RayOptions, *, desc: str, progress: bool
) -> Iterator[Outcome[T, R]]:
    ray = import_ray()
    started_here = connect(options, fn)
    try:
        task = ray.remote(num_cpus=options.num_cpus, max_retries=options.max_retries, retry_exceptions=True)(
            _call
        )
        fn_ref = ray.put(fn)
        pending = {task.remote(fn_ref, item): item for item in items}
        with _Progress(len(items), desc, enabled=progress, cluster=ray) as bar:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=2.0)
                bar.tick(running=len(pending))
                for ref in ready:
                    item = pending.pop(ref)
                    try:
                        value, where, node = ray.get(ref)
                        out: Outcome[T, R] = Outcome(item, value, where=where, node_id=node)
                    except Exception as e:  # a RayTaskError (its cause) or a lost worker, after the retries
                        out = Outcome(item, None, _describe(getattr(e, "cause", None) or e))
                    bar.done(out)
                    yield out
    finally:
        if started_here:
            ray.shutdown()


class _Progress:
    """Finished items out of all on stderr: a tqdm bar, or without tqdm one plain line per update. On Ray the
    bar also says how many tasks are still queued or running and on how many nodes results came back."""

    def __init__(self, total: int, desc: str, *, enabled: bool, cluster: Any = None) -> None:
        self.total, self.desc, self.enabled, self.cluster = total, desc, enabled, cluster
        self.finished = 0
        self.failed = 0
        self.nodes: set[str] = set()
        self._bar: Any = None
        self._last = 0.0

    def __enter__(self) -> _Progress:
        if self.enabled:
            try:
                from tqdm import tqdm

                self._bar = tqdm(total=self.total, desc=self.desc, file=sys.stderr, dynamic_ncols=True)
            except ImportError:
                self._bar = None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self.total:
            self._line(force=True)
            print(file=sys.stderr)

    def done(self, out: Outcome[Any, Any]) -> None:
        self.finished += 1
        self.failed += not out.ok
        if out.node_id:
            self.nodes.add(out.node_id)
        if not self.enabled:
            return
        if self._bar is not None:
            self._postfix(running=self.total - self.finished)  # before update(), which redraws the bar
            self._bar.update(1)
            if not out.ok:
                self._bar.write(f"  failed: {out.error}", file=sys.stderr)
        else:
            self._line()

    def tick(self, *, running: int) -> None:
        if self.enabled and self._bar is not None:
            self._postfix(running=running)

    def _postfix(self, *, running: int) -> None:
        if self.cluster is None or self._bar is None:
            return
        self._bar.set_postfix_str(self._cluster_text(running), refresh=False)

    def _cluster_text(self, running: int) -> str:
        text = f"{running} queued/running, results from {len(self.nodes)} node(s)"
        if self.failed:
            text += f", {self.failed} failed"
        return text

    def _line(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < 1.0 and self.finished < self.total:
            return
        self._last = now
        extra = f"; {self._cluster_text(self.total - self.finished)}" if self.cluster is not None else ""
        print(f"\r{self.desc}: {self.finished}/{self.total} done{extra}", end="", file=sys.stderr, flush=True)


# -- worker-side state ------------------------------------------------------------------------------------------------
_STATE: dict[Any, Any] = {}
_STATE_LOCK = threading.Lock()


def worker_state(key: Any, factory: Callable[[], T]) -> T:
    """The object ``factory`` builds, once per process and ``key``: a Ray worker runs many tasks, and rebuilding
    the embedding model or reopening a store for each would cost more than the task. Objects with a ``close``
    method are closed when the process exits."""
    with _STATE_LOCK:
        if key not in _STATE:
            obj = factory()
            _STATE[key] = obj
            if hasattr(obj, "close"):
                atexit.register(_close_quietly, obj)
        found: T = _STATE[key]
        return found


def _close_quietly(obj: Any) -> None:
    with contextlib.suppress(Exception):
        obj.close()
