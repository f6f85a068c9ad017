"""Pruning weights during training with ``torch.nn.utils.prune`` (Lightning's ``ModelPruning``): by amount per
epoch, globally or per layer, optionally resetting the kept weights to their initial values (lottery ticket)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Sequence
from copy import deepcopy
from functools import partial
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from trainer.callbacks.base import Callback
from trainer.errors import MisconfigurationError
from trainer.module import Module
from trainer.utilities.rank_zero import rank_zero_debug, rank_zero_only

if TYPE_CHECKING:
    from trainer.trainer import Trainer

log = logging.getLogger(__name__)
_FUNCTIONS = ("ln_structured", "l1_unstructured", "random_structured", "random_unstructured")
_METHODS = {"ln_structured": "LnStructured", "l1_unstructured": "L1Unstructured",
            "random_structured": "RandomStructured", "random_unstructured": "RandomUnstructured"}
ParamList = Sequence[tuple[nn.Module, str]]


def _containers() -> tuple[type, ...]:
    return (Module, nn.Sequential, nn.ModuleList, nn.ModuleDict)


class ModelPruning(Callback):
    """``ModelPruning("l1_unstructured", amount=0.5)``; ``amount``, ``apply_pruning`` and
    ``use_lottery_ticket_hypothesis`` may be functions of the epoch."""

    PARAMETER_NAMES = ("weight", "bias")

    def __init__(
        self,
        pruning_fn: Callable | str,
        parameters_to_prune: ParamList = (),
        parameter_names: list[str] | None = None,
        use_global_unstructured: bool = True,
        amount: float | Callable[[int], int | float] = 0.5,
        apply_pruning: bool | Callable[[int], bool] = True,
        make_pruning_permanent: bool = True,
        use_lottery_ticket_hypothesis: bool | Callable[[int], bool] = True,
        resample_parameters: bool = False,
        pruning_dim: int | None = None,
        pruning_norm: int | None = None,
        verbose: int = 0,
        prune_on_train_epoch_end: bool = True,
    ) -> None:
        self._use_global_unstructured = use_global_unstructured
        self._parameters_to_prune = parameters_to_prune
        self._use_lottery_ticket_hypothesis = use_lottery_ticket_hypothesis
        self._resample_parameters = resample_parameters
        self._prune_on_train_epoch_end = prune_on_train_epoch_end
        self._parameter_names = parameter_names or self.PARAMETER_NAMES
        self._global_kwargs: dict[str, Any] = {}
        self._original_layers: dict[int, dict[str, Any]] | None = None
        self._pruning_method_name: str | None = None
        for name in self._parameter_names:
            if name not in self.PARAMETER_NAMES:
                raise MisconfigurationError(
                    f"The provided `parameter_names` name: {name} isn't in {self.PARAMETER_NAMES}")
        pruning_fn = self._resolve_pruning_fn(pruning_fn, use_global_unstructured, pruning_dim, pruning_norm)
        if use_global_unstructured and pruning_fn.PRUNING_TYPE != "unstructured":
            raise MisconfigurationError(
                'Only the "unstructured" PRUNING_TYPE is supported with `use_global_unstructured=True`. Found method '
                f"{pruning_fn} of type {pruning_fn.PRUNING_TYPE}. ")
        self.pruning_fn = pruning_fn
        self._apply_pruning = apply_pruning
        self._make_pruning_permanent = make_pruning_permanent
        if not (isinstance(amount, (int, float)) or callable(amount)):
            raise MisconfigurationError(
                "`amount` should be provided and be either an int, a float or Callable function.")
        self.amount = amount
        if verbose not in (0, 1, 2):
            raise MisconfigurationError("`verbose` must be any of (0, 1, 2)")
        self._verbose = verbose

    def _resolve_pruning_fn(self, pruning_fn: Callable | str, use_global_unstructured: bool, pruning_dim: int | None,
                            pruning_norm: int | None) -> Any:
        """A built-in name (with the ``dim``/``n`` it needs) or a ``BasePruningMethod`` class, as Lightning takes."""
        if isinstance(pruning_fn, str):
            kwargs: dict[str, Any] = {}
            pruning_fn = pruning_fn.lower()
            if pruning_fn not in _FUNCTIONS:
                raise MisconfigurationError(
                    f"The provided `pruning_fn` {pruning_fn} isn't available in PyTorch's built-in functions: "
                    f"{list(_FUNCTIONS)} ")
            if pruning_fn.endswith("_structured"):
                if pruning_dim is None:
                    raise MisconfigurationError(
                        "When requesting `structured` pruning, the `pruning_dim` should be provided.")
                if pruning_fn == "ln_structured":
                    if pruning_norm is None:
                        raise MisconfigurationError(
                            "When requesting `ln_structured` pruning, the `pruning_norm` should be provided.")
                    kwargs["n"] = pruning_norm
                kwargs["dim"] = pruning_dim
            pruning_fn = self._create_pruning_fn(pruning_fn, **kwargs)
        elif self._is_pruning_method(pruning_fn):
            if not use_global_unstructured:
                raise MisconfigurationError(
                    "PyTorch `BasePruningMethod` is currently only supported with `use_global_unstructured=True`.")
        else:
            raise MisconfigurationError(
                f"`pruning_fn` is expected to be a str in {list(_FUNCTIONS)} or a PyTorch `BasePruningMethod`. Found: "
                f"{pruning_fn}. HINT: if passing a `BasePruningMethod`, pass the class, not an instance")
        return pruning_fn

    def filter_parameters_to_prune(self, parameters_to_prune: ParamList = ()) -> ParamList:
        """Override to choose which ``(module, name)`` pairs are pruned."""
        return parameters_to_prune

    def _create_pruning_fn(self, pruning_fn: str, **kwargs: Any) -> Any:
        from torch.nn.utils import prune

        if self._use_global_unstructured:
            method = getattr(prune, _METHODS[pruning_fn])
            self._global_kwargs = kwargs
            self._pruning_method_name = method.__name__
            return method
        function = getattr(prune, pruning_fn)
        self._pruning_method_name = function.__name__
        return partial(function, **kwargs)

    def make_pruning_permanent(self, module: nn.Module) -> None:
        """Remove the pruning reparametrization (``weight_orig``, ``weight_mask``): the zeros stay."""
        from torch.nn.utils import prune

        for _, sub in module.named_modules():
            for key in list(sub._forward_pre_hooks):
                hook = sub._forward_pre_hooks[key]
                if isinstance(hook, prune.BasePruningMethod):
                    hook.remove(sub)
                    del sub._forward_pre_hooks[key]

    @staticmethod
    def _copy_param(new: nn.Module, old: nn.Module, name: str) -> None:
        dst = getattr(new, name + "_orig") if hasattr(new, name + "_orig") else getattr(new, name)
        src = getattr(old, name)
        if isinstance(dst, torch.Tensor) and isinstance(src, torch.Tensor):
            dst.data = src.data.to(dst.device)

    def apply_lottery_ticket_hypothesis(self) -> None:
        """Reset the weights that survive pruning to their values before training (or resampled ones)."""
        for layer in self._original_layers.values():
            copy = layer["data"]
            if self._resample_parameters and callable(getattr(copy, "reset_parameters", None)):
                copy = deepcopy(copy)
                copy.reset_parameters()
            for i, name in layer["names"]:
                new, _ = self._parameters_to_prune[i]
                self._copy_param(new, copy, name)

    def _apply_local_pruning(self, amount: float) -> None:
        for module, name in self._parameters_to_prune:
            self.pruning_fn(module, name=name, amount=amount)

    def _resolve_global_kwargs(self, amount: float) -> dict[str, Any]:
        self._global_kwargs["amount"] = amount
        params = set(inspect.signature(self.pruning_fn).parameters) - {"self"}
        return {k: v for k, v in self._global_kwargs.items() if k in params}

    def _apply_global_pruning(self, amount: float) -> None:
        from torch.nn.utils import prune

        prune.global_unstructured(self._parameters_to_prune, pruning_method=self.pruning_fn,
                                  **self._resolve_global_kwargs(amount))

    @staticmethod
    def _get_pruned_stats(module: nn.Module, name: str) -> tuple[int, int]:
        mask = getattr(module, f"{name}_mask", None)
        if mask is None:
            return 0, 1
        return int((mask == 0).sum().item()), mask.numel()

    def apply_pruning(self, amount: float) -> None:
        prev = [self._get_pruned_stats(m, n) for m, n in self._parameters_to_prune] if self._verbose else []
        if self._use_global_unstructured:
            self._apply_global_pruning(amount)
        else:
            self._apply_local_pruning(amount)
        if self._verbose:
            curr = [self._get_pruned_stats(m, n) for m, n in self._parameters_to_prune]
            self._log_sparsity_stats(prev, curr, amount=amount)

    @rank_zero_only
    def _log_sparsity_stats(self, prev: list[tuple[int, int]], curr: list[tuple[int, int]],
                            amount: float = 0) -> None:
        total = sum(t for _, t in curr)
        before, after = sum(z for z, _ in prev), sum(z for z, _ in curr)
        log.info(f"Applied `{self._pruning_method_name}`. Pruned: {before}/{total} ({before / total:.2%}) -> "
                 f"{after}/{total} ({after / total:.2%})")
        if self._verbose == 2:
            for i, (module, name) in enumerate(self._parameters_to_prune):
                (pz, ps), (cz, cs) = prev[i], curr[i]
                log.info(f"Applied `{self._pruning_method_name}` to `{module!r}.{name}` with amount={amount}. Pruned: "
                         f"{pz} ({pz / ps:.2%}) -> {cz} ({cz / cs:.2%})")

    def setup(self, trainer: Trainer, pl_module: Module, stage: str) -> None:
        params = self.sanitize_parameters_to_prune(pl_module, self._parameters_to_prune,
                                                   parameter_names=self._parameter_names)
        self._parameters_to_prune = self.filter_parameters_to_prune(params)
        if self._use_lottery_ticket_hypothesis:
            self._original_layers = {}
            for i, (module, name) in enumerate(self._parameters_to_prune):
                layer = self._original_layers.setdefault(id(module), {"data": deepcopy(module), "names": []})
                layer["names"].append((i, name))

    def _run_pruning(self, current_epoch: int) -> None:
        prune = self._apply_pruning(current_epoch) if callable(self._apply_pruning) else self._apply_pruning
        amount = self.amount(current_epoch) if callable(self.amount) else self.amount
        if not prune or not amount:
            return
        self.apply_pruning(amount)
        lottery = self._use_lottery_ticket_hypothesis
        if lottery(current_epoch) if callable(lottery) else lottery:
            self.apply_lottery_ticket_hypothesis()

    def on_train_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        if self._prune_on_train_epoch_end:
            rank_zero_debug("`ModelPruning.on_train_epoch_end`. Applying pruning")
            self._run_pruning(pl_module.current_epoch)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: Module) -> None:
        if not trainer.sanity_checking and not self._prune_on_train_epoch_end:
            rank_zero_debug("`ModelPruning.on_validation_epoch_end`. Applying pruning")
            self._run_pruning(pl_module.current_epoch)

    def on_train_end(self, trainer: Trainer, pl_module: Module) -> None:
        if self._make_pruning_permanent:
            self.make_pruning_permanent(pl_module)

    def _make_pruning_permanent_on_state_dict(self, pl_module: Module) -> dict[str, Any]:
        state = pl_module.state_dict()
        for name in {k[: -len("_mask")] for k in state if k.endswith("_mask")}:
            orig, mask = state.pop(name + "_orig"), state.pop(name + "_mask")
            state[name] = mask.to(dtype=orig.dtype) * orig
        return {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in state.items()}

    def on_save_checkpoint(self, trainer: Trainer, pl_module: Module, checkpoint: dict[str, Any]) -> None:
        if self._make_pruning_permanent:
            checkpoint["state_dict"] = self._make_pruning_permanent_on_state_dict(pl_module)

    @staticmethod
    def sanitize_parameters_to_prune(pl_module: nn.Module, parameters_to_prune: ParamList = (),
                                     parameter_names: Sequence[str] = ()) -> ParamList:
        """Every ``weight``/``bias`` of the model's layers when none are given; else check the given pairs exist."""
        names = parameter_names or ModelPruning.PARAMETER_NAMES
        current = [m for m in pl_module.modules() if not isinstance(m, _containers())]
        if not parameters_to_prune:
            return [(m, p) for p in names for m in current if isinstance(getattr(m, p, None), nn.Parameter)]
        pairs_ok = isinstance(parameters_to_prune, (list, tuple)) and all(
            len(p) == 2 and isinstance(p[0], nn.Module) and isinstance(p[1], str) for p in parameters_to_prune)
        if not pairs_ok:
            raise MisconfigurationError(
                "The provided `parameters_to_prune` should either be list of tuple with 2 elements: (nn.Module, "
                "parameter_name_to_prune) or None")
        missing_modules = [m for m, _ in parameters_to_prune if m not in current]
        missing_parameters = [n for m, n in parameters_to_prune if m in current and not hasattr(m, n)]
        if missing_modules or missing_parameters:
            raise MisconfigurationError(
                "Some provided `parameters_to_prune` don't exist in the model. Found missing modules: "
                f"{missing_modules} and missing parameters: {missing_parameters}")
        return parameters_to_prune

    @staticmethod
    def _is_pruning_method(method: object) -> bool:
        from torch.nn.utils import prune

        return inspect.isclass(method) and issubclass(method, prune.BasePruningMethod)
