"""__project__: a model and data trained with Relay."""
