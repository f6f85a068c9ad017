"""``Module.to_torchscript``: a module as TorchScript, for deployment code that still loads ``torch.jit`` files."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import torch

from trainer.utilities.zero_edit import lightning_defaults
from trainer.utilities.rank_zero import rank_zero_deprecation

if TYPE_CHECKING:
    from torch.onnx import ONNXProgram

    from trainer.module import Module


def _on_device(module: Module, inputs: object) -> Any:
    """Example inputs through the module's batch-transfer hooks, so they reach its device as a batch would."""
    inputs = module.on_before_batch_transfer(inputs, 0)
    inputs = module.transfer_batch_to_device(inputs, module.device, 0)
    return module.on_after_batch_transfer(inputs, 0)


_DEPRECATION = ("`Module.to_torchscript` is deprecated: TorchScript is deprecated in PyTorch. Use "
                "`torch.export.export()` (https://pytorch.org/docs/stable/export.html) or `Module.to_onnx`.")
_LIGHTNING_DEPRECATION = ("`LightningModule.to_torchscript` has been deprecated in v2.7 and will be removed in v2.8. "
                          "TorchScript is deprecated in PyTorch. Use `torch.export.export()` for model exporting "
                          "instead. See https://pytorch.org/docs/stable/export.html for more information.")


@torch.no_grad()
def to_torchscript(
    module: Module, file_path: str | os.PathLike | None, method: str | None, example_inputs: object, **kwargs: Any
) -> torch.jit.ScriptModule:
    """Script or trace ``module`` in eval mode (its train/eval mode is restored after), optionally saving it.

    Deprecated, as TorchScript is in PyTorch (and Lightning 2.6.6 deprecates ``to_torchscript``): the warning
    says so in Lightning's words in the zero-edit mode, where code may match on them.
    """
    rank_zero_deprecation(_LIGHTNING_DEPRECATION if lightning_defaults() else _DEPRECATION)
    if method not in ("script", "trace"):
        raise ValueError(f"The 'method' parameter only supports 'script' or 'trace', but value given was: {method}")
    was_training = module.training
    try:
        if method == "script":
            scripted = torch.jit.script(module.eval(), **kwargs)
        else:
            if example_inputs is None:
                example_inputs = module.example_input_array
            if example_inputs is None:
                raise ValueError(
                    "Choosing method=`trace` requires either `example_inputs` or `model.example_input_array` to be "
                    "defined: pass example_inputs=... or set module.example_input_array."
                )
            if kwargs.get("check_inputs") is not None:
                kwargs["check_inputs"] = _on_device(module, kwargs["check_inputs"])
            scripted = torch.jit.trace(module.eval(), _on_device(module, example_inputs), **kwargs)
    finally:
        module.train(was_training)
    if file_path is not None:
        torch.jit.save(scripted, os.fspath(file_path))
    return scripted


def to_onnx(module: Module, file_path: str | os.PathLike | Any | None, input_sample: object, **kwargs: Any,
            ) -> ONNXProgram | None:
    """Export ``module`` with ``torch.onnx.export`` (what it returns: an ``ONNXProgram`` with the default dynamo
    exporter), tracing with ``input_sample`` or, when None, ``module.example_input_array``; the module's train/eval
    mode is restored after. Needs ``onnx`` (and ``onnxscript`` for the dynamo exporter)."""
    from lightning_utilities.core.imports import RequirementCache

    if not RequirementCache("onnx"):
        raise ModuleNotFoundError(f"`{type(module).__name__}.to_onnx()` requires `onnx` to be installed: "
                                  "pip install onnx onnxscript")
    if kwargs.get("dynamo", True) and not RequirementCache("onnxscript"):
        raise ModuleNotFoundError(f"`{type(module).__name__}.to_onnx()` with the dynamo exporter (torch's default) "
                                  "requires `onnxscript`: pip install onnxscript, or pass dynamo=False")
    if input_sample is None:
        input_sample = module.example_input_array
    if input_sample is None:
        raise ValueError("Could not export to ONNX since neither `input_sample` nor `model.example_input_array` "
                         "attribute is set: to_onnx() needs an input to trace with.")
    was_training = module.training
    try:
        path = os.fspath(file_path) if isinstance(file_path, (str, os.PathLike)) else file_path  # or a BytesIO
        return torch.onnx.export(module, _on_device(module, input_sample), path, **kwargs)
    finally:
        module.train(was_training)
