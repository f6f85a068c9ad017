"""Checkpoints: what they hold, how they are written and read, and resume (one owner: ``resume.py``)."""
