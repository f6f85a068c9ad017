"""Transforms of a model's blocks that a strategy applies in one fixed order: activation checkpointing, then
``torch.compile``, before the data-parallel wrapper (FSDP2 per block, DDP around the whole).

Tensor parallel (the Module's ``configure_model``) has run before; this is torchtitan's order: tensor parallel,
activation checkpointing, compile, FSDP. ``blocks.apply_model_transforms`` is the one entry point a strategy calls;
``activation_checkpointing`` and ``compile`` parse the Trainer's ``activation_checkpointing=`` and ``compile=``
values. Nothing here imports ``torch._dynamo`` until a model is really compiled.
"""
