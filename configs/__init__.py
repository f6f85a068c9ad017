"""Relay's Hydra config tree, shipped inside the wheel as ``trainer.configs``."""
