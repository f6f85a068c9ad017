"""A Lightning + Hydra project in the common template's layout: every object comes from a ``_target_`` config.

Run: ``python train.py trainer=ddp_spawn hydra.run.dir=out``. It writes ``<run dir>/result.json``.
"""

import json
import os

import hydra
import lightning as L
from omegaconf import DictConfig


@hydra.main(version_base="1.3", config_path="configs", config_name="train")
def main(cfg: DictConfig) -> None:
    L.seed_everything(cfg.seed, workers=True)
    datamodule: L.LightningDataModule = hydra.utils.instantiate(cfg.data)
    model: L.LightningModule = hydra.utils.instantiate(cfg.model)
    callbacks = [hydra.utils.instantiate(node) for node in cfg.callbacks.values()]
    logger = hydra.utils.instantiate(cfg.logger)  # a ListConfig of loggers, as the template passes it
    trainer: L.Trainer = hydra.utils.instantiate(cfg.trainer, callbacks=callbacks, logger=logger)
    trainer.fit(model=model, datamodule=datamodule)
    out = hydra.core.hydra_config.HydraConfig.get().runtime.output_dir
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump({
            "strategy": type(trainer.strategy).__name__,
            "global_step": trainer.global_step,
            "val_acc": float(trainer.callback_metrics["val/acc"]),
            "best_model_path": trainer.checkpoint_callback.best_model_path,
            "metrics": sorted(trainer.callback_metrics),
        }, f)


if __name__ == "__main__":
    main()
