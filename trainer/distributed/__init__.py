"""Processes and ranks: the calls into the plugins both front ends make, launching, rank-zero state, the heartbeat."""
