"""The Module's support: hyperparameters, ``configure_optimizers`` forms, loading from checkpoints, export."""
