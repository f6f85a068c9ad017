"""Weights in and out of other ecosystems' formats (Hugging Face ``safetensors``)."""
