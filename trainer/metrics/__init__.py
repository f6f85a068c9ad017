"""What ``self.log`` records and how it reaches callbacks, the progress bar and the loggers."""
