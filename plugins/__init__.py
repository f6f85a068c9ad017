"""Relay's plugins: accelerators, strategies, precision, cluster environments and launchers.

Plugins know torch and their own library, never the ``trainer`` package.
"""
