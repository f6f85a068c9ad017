"""Lightning names served one at a time, like ``names.NAMES``: engine part (`lightning.pytorch` loops, trainer connectors, strategies, launchers, overrides, tuner, plugins, core) (merged into ``names.NAMES``).

Keyed by the Lightning module that defines each name (re-exporting modules follow). The implementations are in
``impl/loops_*.py``; each file's docstring says which of the three ways (Relay's own helper, Relay's counterpart,
a clear error) its names take.
"""

from __future__ import annotations

_P = "lightning.pytorch"
_F = "lightning.fabric"
_IMPL = "trainer.lightning_compat.impl"


def _from(module: str, impl: str, *names: str) -> dict[str, str]:
    return {f"{_P}.{module}:{n}": f"{_IMPL}.{impl}:{n}" for n in names}


NAMES: dict[str, str] = {
    **_from("loops.progress", "loops_progress", "_BaseProgress", "_ReadyCompletedTracker", "_StartedTracker",
            "_ProcessedTracker", "_Progress", "_BatchProgress", "_SchedulerProgress", "_OptimizerProgress",
            "_OptimizationProgress"),
    **_from("loops.loop", "loops_progress", "_Loop"),
    **_from("loops.optimization.closure", "loops_closure", "OutputResult", "AbstractClosure"),
    **_from("loops.optimization.automatic", "loops_closure", "ClosureResult", "Closure"),
    **_from("loops.optimization.manual", "loops_closure", "ManualResult"),
    **_from("loops.fetchers", "loops_fetchers", "_DataFetcher", "_PrefetchDataFetcher", "_DataLoaderIterDataFetcher",
            "_DataFetcherWrapper", "_profile_nothing"),
    **_from("overrides.distributed", "loops_samplers", "UnrepeatedDistributedSampler",
            "UnrepeatedDistributedSamplerWrapper", "_IndexBatchSamplerWrapper", "_find_tensors",
            "prepare_for_backward", "_sync_module_states", "_register_ddp_comm_hook"),
    **_from("strategies.launchers.launcher", "loops_launchers", "_Launcher"),
    **_from("strategies.launchers.multiprocessing", "loops_launchers", "_MultiProcessingLauncher",
            "_GlobalStateSnapshot", "_WorkerOutput"),
    **_from("strategies.launchers.subprocess_script", "loops_launchers", "_SubprocessScriptLauncher"),
}
