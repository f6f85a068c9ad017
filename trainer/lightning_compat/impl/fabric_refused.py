"""Lightning Fabric's engine internals that Relay has no counterpart of: they import everywhere (so a file that
imports them loads) and raise ``LightningEngineInternalError`` when constructed or called, naming what they are
and what Relay does instead. Each carries ``__relay_refused__`` (its reason), which the surface check reports and
``surface/exceptions.py`` lists as an allowed exception.

How the ``lightning.fabric`` names are served (``impl/fabric_*.py``, table ``names_fabric.py``):
1. a helper with defined behaviour is written here, with Lightning's signature and observable behaviour (results,
   exception types and messages), reusing Relay's own functions where Relay does the same thing;
2. a Lightning engine class Relay has a counterpart of is served as that counterpart (or a small adapter);
3. an engine internal Relay has no counterpart of imports everywhere and raises, when constructed or called, an
   error naming what it is and what Relay does instead (this file).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

from trainer.lightning_compat.impl.fabric_launchers import _Launcher
from trainer.lightning_compat.impl.xla import _refuse as _refuse_xla

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from torch.nn import Module

    _POLICY_SET = set[type[Module]]


class LightningEngineInternalError(NotImplementedError):
    """A piece of Lightning's engine that Relay's zero-edit mode serves by name only."""


def _message(name: str, reason: str) -> str:
    return (f"{name} is a piece of Lightning's engine that Relay does not run: {reason} (Relay's Lightning "
            "compatibility mode serves the name so that files importing it load; see docs/lightning_api.md).")


def _refused_class(name: str, reason: str, base: type = object) -> type:
    """A class named as Lightning's whose construction raises (subclasses too)."""
    qualname = name.rsplit(":", 1)[1]

    def __new__(cls: type, *args: object, **kwargs: object) -> NoReturn:
        raise LightningEngineInternalError(_message(name, reason))

    return type(qualname, (base,), {"__new__": __new__, "__relay_refused__": reason, "__module__": __name__,
                                    "__doc__": f"``{name}``: not run by Relay ({reason})."})


def _refused_function(name: str, reason: str) -> Callable[..., NoReturn]:
    """A function named as Lightning's that raises when called."""

    def refused(*args: object, **kwargs: object) -> NoReturn:
        raise LightningEngineInternalError(_message(name, reason))

    refused.__name__ = refused.__qualname__ = name.rsplit(":", 1)[1]
    refused.__doc__ = f"``{name}``: not run by Relay ({reason})."
    refused.__relay_refused__ = reason  # type: ignore[attr-defined]
    return refused


_F = "lightning.fabric"

# --- the connector ---------------------------------------------------------------------------------------------------
_CONNECTOR = ("Relay's Fabric chooses its accelerator, strategy, precision and cluster environment in "
              "`trainer.fabric.Fabric` itself (`fabric.accelerator`, `fabric.strategy` show the choice)")
_Connector = _refused_class(f"{_F}.connector:_Connector", _CONNECTOR)


# --- launchers -------------------------------------------------------------------------------------------------------
_SCRIPT = ("Relay starts worker processes for `strategy='ddp'` with its launcher on torch.distributed.elastic "
           "(plugins/launchers/elastic.py), and watches them there")
_SubprocessScriptLauncher = _refused_class(f"{_F}.strategies.launchers.subprocess_script:_SubprocessScriptLauncher",
                                           _SCRIPT, _Launcher)
_ChildProcessObserver = _refused_class(f"{_F}.strategies.launchers.subprocess_script:_ChildProcessObserver", _SCRIPT)
_launch_process_observer = _refused_function(
    f"{_F}.strategies.launchers.subprocess_script:_launch_process_observer", _SCRIPT)


# --- Lightning's TPU graveyard: it patches its legacy TPU names into its modules; Relay's alias serves them ---------
_GRAVEYARD = ("Relay serves Lightning's legacy TPU names (`TPUAccelerator`, `lightning.fabric.accelerators.tpu`) "
              "through its module aliases; there is nothing to patch")
_patch_sys_modules = _refused_function(f"{_F}._graveyard.tpu:_patch_sys_modules", _GRAVEYARD)
_patch_classes = _refused_function(f"{_F}._graveyard.tpu:_patch_classes", _GRAVEYARD)


# --- model-parallel checkpoints and the lazy-loading unpickler -----------------------------------------------------------
_MODEL_PARALLEL_CHECKPOINT = ("Relay's ModelParallelStrategy saves and loads its checkpoints itself (a sharded "
                              "directory read back into any world size: plugins/strategies/sharded_checkpoint.py); "
                              "use fabric.save / fabric.load")
_save_checkpoint = _refused_function(f"{_F}.strategies.model_parallel:_save_checkpoint", _MODEL_PARALLEL_CHECKPOINT)
_load_checkpoint = _refused_function(f"{_F}.strategies.model_parallel:_load_checkpoint", _MODEL_PARALLEL_CHECKPOINT)
_LazyLoadingUnpickler = _refused_class(
    f"{_F}.utilities.load:_LazyLoadingUnpickler",
    "Relay's `_lazy_load` memory-maps the checkpoint through torch.load's weights-only unpickler instead of a "
    "plain pickle unpickler (a checkpoint is data, never code)")


# --- XLA FSDP (no torch_xla here, and no XLA backend in Relay): as Lightning without torch_xla, then Relay's refusal --
class _XLAFSDPBackwardSyncControl:
    """``no_backward_sync`` of an XLA-FSDP module: needs torch_xla."""

    def no_backward_sync(self, module: Module, enabled: bool) -> AbstractContextManager:
        _refuse_xla()


def _activation_checkpointing_auto_wrapper(policy: _POLICY_SET, module: Module, *args: Any, **kwargs: Any) -> Module:
    """XLA-FSDP's activation-checkpointing wrapper: needs torch_xla."""
    _refuse_xla()


def _rank_teardown(rank: int) -> None:
    """The XLA launcher's end-of-process rendezvous: needs torch_xla."""
    _refuse_xla()
