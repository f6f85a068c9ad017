"""Running Relay's entry point through Spark's ``TorchDistributor`` (pyspark 4.x, Java 17+).

``TorchDistributor(num_processes=N, local_mode=..., use_gpu=...).run(function, *args)`` starts the
processes with torchrun (on the driver in local mode, in barrier tasks on the executors otherwise), so
the workers detect the torch elastic environment as under torchrun. What this launcher adds, each for
a behaviour measured with pyspark 4.x:

- it passes a function, never a script path: with a script path a failed rank can come back as
  ``None`` with no error;
- the function is pickled by reference, so the workers must import it: ``PYTHONPATH`` is passed to
  the torchrun processes (and to the executors through ``spark.executorEnv``);
- Spark's error names no rank, and a rank can fail while another's result comes back: every rank
  writes a status file, which the launcher reads to name the failing rank and its error;
- ``run`` returns whichever rank's value was written last: rank 0's result is read from its status file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from plugins.launchers.base import FunctionLauncher, RankFailedError, first_line, is_peer_failure, workers_environment


class SparkLauncher(FunctionLauncher):
    """``N`` processes through ``TorchDistributor``; uses the active SparkSession or starts one."""

    name = "spark"

    def __init__(
        self, local_mode: bool = True, master: str | None = None, status_dir: str | None = None,
        quiet: bool = True,
    ) -> None:
        self.local_mode = bool(local_mode)
        self.master = master
        self.status_dir = status_dir
        self.quiet = quiet

    def run(
        self, entry: Callable[..., Any], args: tuple[Any, ...], processes: int, use_gpu: bool,
        env: Mapping[str, str] | None = None,
    ) -> Any:
        """Rank 0's return value; raises ``RankFailedError`` naming the rank that failed first."""
        env = dict(env or {})
        status = Path(self.status_dir or Path.cwd() / ".relay-spark").expanduser().resolve() / uuid.uuid4().hex[:12]
        status.mkdir(parents=True)
        try:
            with _quiet_imports(), workers_environment(env), self._session(processes, env, status):
                from pyspark.ml.torch.distributor import TorchDistributor

                distributor = TorchDistributor(num_processes=processes, local_mode=self.local_mode, use_gpu=use_gpu)
                try:
                    distributor.run(_spark_worker, entry, tuple(args), str(status))
                    error: BaseException | None = None
                except Exception as err:  # noqa: BLE001 - the status files say which rank and why
                    error = err
            reports = read_status(status)
        finally:
            shutil.rmtree(status, ignore_errors=True)
            with contextlib.suppress(OSError):  # the shared parent, once no run uses it
                status.parent.rmdir()
        failed = failure_of(reports, processes, error)
        if failed is not None:
            raise RankFailedError(*failed, processes)
        return reports[0].get("result")

    @contextlib.contextmanager
    def _session(self, processes: int, env: Mapping[str, str], scratch: Path) -> Iterator[Any]:
        with _quiet_imports():
            try:
                from pyspark.sql import SparkSession
            except ImportError:
                raise ValueError(
                    "launcher=spark needs pyspark 4.x (and Java 17+), which is not installed: "
                    "pip install 'relaytrain[spark]' (or pip install 'pyspark>=4,<5')."
                ) from None
        active = SparkSession.getActiveSession()
        if active is not None:
            yield active
            return
        master = self.master or f"local[{max(processes, 1)}]"
        builder = SparkSession.builder.appName("relay").master(master).config("spark.ui.enabled", "false")
        if "PYTHONPATH" in env:
            builder = builder.config("spark.executorEnv.PYTHONPATH", env["PYTHONPATH"])
        if self.quiet:  # Spark's JVM logs at ERROR from its start (setLogLevel only acts once it runs)
            config = scratch / "log4j2.properties"
            config.write_text(_LOG4J_ERRORS_ONLY)
            builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{config}")
            for name in ("py4j", "TorchDistributor"):
                logging.getLogger(name).setLevel(logging.WARNING)
        saved_ip = os.environ.get("SPARK_LOCAL_IP")
        if master.startswith("local") and saved_ip is None:  # no "hostname resolves to a loopback" warning
            os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
        session = builder.getOrCreate()
        if self.quiet:
            session.sparkContext.setLogLevel("ERROR")
        try:
            yield session
        finally:
            session.stop()


_LOG4J_ERRORS_ONLY = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
"""


@contextlib.contextmanager
def _quiet_imports() -> Iterator[None]:
    """pyspark warns about the pandas version when its ML and SQL modules load."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _spark_worker(entry: Callable[..., Any], args: tuple[Any, ...], status_dir: str) -> Any:
    """Runs in every process: Relay's entry, then this rank's status file (rank 0's carries the result)."""
    rank = int(os.environ.get("RANK", "0"))
    try:
        result = entry(*args)
    except BaseException as err:
        write_status(status_dir, rank, {"ok": False, "error": first_line(err), "time": time.time()})
        raise
    write_status(status_dir, rank, {"ok": True, "result": result if rank == 0 else None, "time": time.time()})
    return result if rank == 0 else None


def write_status(status_dir: str, rank: int, report: dict[str, Any]) -> None:
    """Atomically, as JSON (data, never pickle): the launcher may read while a rank still writes."""
    path = Path(status_dir) / f"rank{rank}.json"
    temporary = path.with_suffix(f".{os.getpid()}.tmp")
    temporary.write_text(json.dumps(report, default=str))
    os.replace(temporary, path)


def read_status(status_dir: Path) -> dict[int, dict[str, Any]]:
    reports = {}
    for path in status_dir.glob("rank*.json"):
        with contextlib.suppress(ValueError, OSError):
            reports[int(path.stem.removeprefix("rank"))] = json.loads(path.read_text())
    return reports


def failure_of(
    reports: Mapping[int, Mapping[str, Any]], processes: int, error: BaseException | None,
) -> tuple[int | None, str] | None:
    """``(rank, reason)`` for the rank that failed first on its own; None when every rank succeeded."""
    failed = sorted((r.get("time", 0.0), rank) for rank, r in reports.items() if not r.get("ok"))
    own = [(t, rank) for t, rank in failed if not is_peer_failure(str(reports[rank].get("error", "")))]
    if own or failed:
        rank = (own or failed)[0][1]
        return rank, str(reports[rank].get("error", "failed"))
    missing = [rank for rank in range(processes) if rank not in reports]
    if missing:
        reason = "exited without reporting: killed, or its process died"
        if error is not None:
            reason += f"; Spark: {first_line(error)}"
        return missing[0], reason
    if error is not None:
        return None, first_line(error)
    return None
