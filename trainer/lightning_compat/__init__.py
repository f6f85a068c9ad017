"""Lightning code on Relay, unmodified: ``lightning``, ``lightning.pytorch``, ``pytorch_lightning`` and
``lightning.fabric`` (``lightning_fabric``) served by Relay.

``install()`` puts an import finder in front of ``sys.meta_path``. It answers for those three names only.
Every module Lightning has imports (the list, with the names each module defines, is data read from Lightning
itself: ``surface/``); each becomes a thin alias whose attributes are Relay's objects (``alias.py``), so
``pl.LightningModule`` *is* ``trainer.Module``. Using a Lightning name Relay lacks fails with one line that names
it and points at ``docs/lightning_api.md``; importing its module does not. Nothing happens unless this mode is
asked for (``python -m trainer.lightning_compat script.py``, or ``install()``): an installed Lightning stays
untouched otherwise.

Child processes (DDP workers, ``ddp_spawn`` workers, dataloader workers started with ``spawn``) get the
same mode through two inherited environment variables: ``RELAY_LIGHTNING_COMPAT=1`` and a ``PYTHONPATH``
entry whose ``sitecustomize`` calls ``install()`` at interpreter start.
"""

from __future__ import annotations

from trainer.utilities.lazy import lazy_exports

_EXPORTS = {
    "install": "trainer.lightning_compat.finder",
    "uninstall": "trainer.lightning_compat.finder",
    "installed": "trainer.lightning_compat.finder",
    "serves_module": "trainer.lightning_compat.finder",
    "LightningFinder": "trainer.lightning_compat.finder",
    "COMPAT_ENV": "trainer.lightning_compat.finder",
    "BOOT_DIR": "trainer.lightning_compat.finder",
    "LIGHTNING_API_VERSION": "trainer.lightning_compat.finder",
    "relay_module_for": "trainer.lightning_compat.paths",
    "NotProvidedError": "trainer.lightning_compat.errors",
    "LightningImportError": "trainer.lightning_compat.errors",
    "LightningAttributeError": "trainer.lightning_compat.errors",
}
__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
