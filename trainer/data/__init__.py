"""Data: loaders the Trainer shards and resumes mid-epoch, and moving batches to the device."""
