"""Starter project and launch files, shipped inside the wheel as ``trainer.templates``."""
