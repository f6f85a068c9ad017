"""The Trainer's arguments: declared and checked once (``TrainerArguments``), limits parsed, torch switches applied."""
