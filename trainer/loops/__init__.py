"""The Trainer's loops: run (setup/teardown), fit, evaluation, optimization, checkpoint state."""
