"""Relay's implementations of Lightning names Relay's own packages do not have, one concern per module; served
through ``trainer/lightning_compat/names.py`` at the Lightning paths that define them."""
