"""raymap without Ray: the local map, its options and its error messages (the cluster is tested in
tests/integration/test_ray_batch.py)."""

from __future__ import annotations

import argparse
import builtins
import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from graphrecall import raymap


def _square(x: int) -> int:
    if x == 3:
        raise ValueError("three is not allowed")
    return x * x


def test_a_local_map_yields_every_item_in_order_and_reports_failures_without_stopping() -> None:
    outs = list(raymap.run_map(_square, [1, 2, 3, 4], progress=False))
    assert [o.item for o in outs] == [1, 2, 3, 4]
    assert [o.value for o in outs] == [1, 4, None, 16]
    assert [o.ok for o in outs] == [True, True, False, True]
    assert outs[2].error == "ValueError: three is not allowed"
    assert all(o.where and not o.node_id for o in outs)


def test_a_threaded_local_map_runs_items_side_by_side() -> None:
    seen: set[int] = set()
    both = threading.Barrier(2, timeout=5)

    def work(x: int) -> int:
        seen.add(threading.get_ident())
        both.wait()  # only passes when two items run at once
        return x

    outs = list(raymap.run_map(work, [1, 2], concurrency=2, progress=False))
    assert sorted(o.value for o in outs if o.value is not None) == [1, 2]
    assert len(seen) == 2


def test_without_tqdm_progress_is_a_plain_line_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    real_import = builtins.__import__

    def no_tqdm(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "tqdm":
            raise ImportError("no tqdm here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tqdm)
    list(raymap.run_map(_square, [1, 2], desc="items"))
    assert "items: 2/2 done" in capsys.readouterr().err


def test_a_local_run_never_imports_ray() -> None:
    """Not by raymap, nor by the commands and harnesses that take --ray (imported and parsed without it)."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); from graphrecall import raymap\n"
        "list(raymap.run_map(abs, [-1, 2], progress=True))\n"
        "p = raymap.argparse.ArgumentParser(); raymap.add_ray_arguments(p)\n"
        "assert raymap.options_from_args(p.parse_args([])) is None\n"
        "import graphrecall.cli_extract, benchmarks.longmemeval.qa, benchmarks.locomo.qa\n"
        "import benchmarks.longmemeval.retrieval as r, benchmarks.locomo.retrieval\n"
        "assert raymap.options_from_args(r._parser().parse_args(['--data', sys.argv[1] + '/pyproject.toml'])) is None\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code, str(root)], check=True, timeout=120, cwd=root)


def _parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    raymap.add_ray_arguments(p)
    return p.parse_args(list(argv))


def test_ray_options_from_the_command_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(raymap, "import_ray", lambda: None)  # whether Ray is installed here does not matter
    assert raymap.options_from_args(_parse()) is None
    assert raymap.options_from_args(_parse("--ray")) == raymap.RayOptions(address=None)
    opts = raymap.options_from_args(_parse("--ray", "auto", "--ray-cpus", "2", "--ray-retries", "0"))
    assert opts == raymap.RayOptions(address="auto", num_cpus=2.0, max_retries=0)
    assert raymap.options_from_args(_parse("--ray", "10.0.0.1:6379")) == raymap.RayOptions("10.0.0.1:6379")


@pytest.mark.parametrize("argv", [["--ray-cpus", "0"], ["--ray-cpus", "x"], ["--ray-retries", "-1"]])
def test_bad_ray_options_are_usage_errors(argv: list[str], capsys: Any) -> None:
    with pytest.raises(SystemExit) as e:
        _parse(*argv)
    assert e.value.code == 2
    assert argv[0] in capsys.readouterr().err


def test_ray_missing_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, capsys: Any, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ImportError
    hint = "pip install 'graphrecall[ray]'"
    with pytest.raises(raymap.RayNotInstalled, match=r"pip install 'graphrecall\[ray\]'"):
        list(raymap.run_map(abs, [1], ray=raymap.RayOptions(), progress=False))
    # a harness stops with a usage error before reading its data (here not even a JSON list)
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.longmemeval.retrieval import main as retrieval_main

    with pytest.raises(SystemExit) as e:
        (tmp_path / "unread.json").write_text("not json")
        retrieval_main(["--data", str(tmp_path / "unread.json"), "--ray"])
    assert e.value.code == 2 and hint in capsys.readouterr().err
    # the command line: not_available (exit 2) before it looks for an LLM or a store
    from graphrecall.cli import main as cli_main

    assert cli_main(["extract", "--root", str(tmp_path), "--all-scopes", "--ray", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "not_available" and hint in error["message"]


def test_workers_get_the_offline_settings_and_the_drivers_code_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("GRAPHRECALL_EMBED_CACHE", "/data/cache.sqlite")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    env = raymap.worker_env(_square)
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["GRAPHRECALL_EMBED_CACHE"] == "/data/cache.sqlite"
    assert "UNRELATED_SECRET" not in env
    src = str(Path(raymap.__file__).resolve().parents[1])
    assert src in env["PYTHONPATH"].split(":")


def test_worker_state_is_built_once_per_key() -> None:
    built: list[int] = []

    def make() -> list[int]:
        built.append(1)
        return built

    key = ("test", object())
    assert raymap.worker_state(key, make) is raymap.worker_state(key, make)
    assert built == [1]


def test_every_ray_task_travels_as_plain_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What each --ray caller sends its workers pickles, with absolute paths (a worker's directory is its own)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "d.json").write_text("[]")  # --data must name a file; a relative one travels absolute
    import pickle
    import sys as _sys
    from functools import partial

    _sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks.locomo import qa as locomo_qa
    from benchmarks.locomo import retrieval as locomo_retrieval
    from benchmarks.longmemeval import qa as lme_qa
    from benchmarks.longmemeval import retrieval as lme_retrieval

    from graphrecall import cli_extract

    args = lme_qa._parser().parse_args(
        ["--data", "d.json", "--llm", "openai:m", "--judge", "openai:j", "--ray"]
    )
    spec = lme_qa.QASpec.from_args(args)
    assert spec.embed_cache is not None and Path(spec.embed_cache).is_absolute()
    largs = locomo_qa._parser().parse_args(["--data", "d.json", "--llm", "openai:m", "--judge", "openai:j"])
    rargs = lme_retrieval._parser().parse_args(["--data", "d.json", "--ray", "auto"])
    assert raymap.options_from_args(rargs) == raymap.RayOptions(address="auto")
    tasks = [
        partial(lme_qa.question_task, spec),
        partial(locomo_qa.conversation_task, locomo_qa.QASpec.from_args(largs), 2),
        partial(
            lme_retrieval.question_task, lme_retrieval.RunSpec("hashing", "/c", None, {}, {}, [5], [], {})
        ),
        partial(
            locomo_retrieval.conversation_task, locomo_retrieval.ConvSpec("hashing", "/c", None, {}, [], "x")
        ),
        partial(
            cli_extract.extract_scope_task, cli_extract.ExtractSpec("/root", "hashing", "openai:m", None)
        ),
    ]
    for task in tasks:
        back = pickle.loads(pickle.dumps(task))
        assert back.func is task.func and back.args == task.args
