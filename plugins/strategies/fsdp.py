"""Fully sharded data parallel on FSDP2 (``torch.distributed.fsdp.fully_shard``) over a ``DeviceMesh``.

Each process holds 1/N of every parameter, gradient and optimizer state; a block's parameters are
all-gathered just before it runs and gradients are reduce-scattered after its backward. On CPU this runs
over gloo, so the tests train with it for real.

How the module is sharded (after ``Module.configure_model``, which may build layers on the meta device or
apply ``fully_shard`` itself; then the strategy changes nothing):

1. activation checkpointing on the blocks ``activation_checkpointing_policy`` names,
2. ``fully_shard`` on every block of ``auto_wrap_policy`` (default: every entry of an ``nn.ModuleList``,
   the way transformers keep their layers),
3. ``fully_shard`` on every direct child of the Module that holds parameters; those are the FSDP roots, so
   ``training_step`` calling ``self.model(x)`` runs the hooks that gather them,
4. a model on the meta device is then allocated (only its shards) and initialised (``init_weights()`` where a
   module has one, else ``reset_parameters()``).

Checkpoints are sharded directories by default (``state_dict_type="sharded"``, see
``plugins/strategies/sharded_checkpoint.py``); ``"full"`` writes one file from rank 0, gathered one tensor
at a time onto its CPU.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import torch

from plugins.strategies.init_context import tensor_init_context
from plugins.strategies.mesh import MeshLayout, submesh
from plugins.strategies.parallel import ParallelStrategy
from plugins.strategies.parallelize import apply_activation_checkpointing, apply_fsdp
from plugins.strategies.sharded_checkpoint import ShardedState, save_sharded
from plugins.strategies.state_layout import optimizer_state_by_name

SHARDING_STRATEGIES = ("FULL_SHARD", "SHARD_GRAD_OP", "HYBRID_SHARD")
STATE_DICT_TYPES = ("sharded", "full")


def _policy(value: Any, arg: str) -> Any:
    """A set of module classes, or class names (from YAML); ``None`` is the default, ``True``/``False`` as given."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, (type, str)):
        value = [value]
    if not isinstance(value, Iterable):
        raise ValueError(f"FSDPStrategy({arg}={value!r}) must be a set of nn.Module classes or class names.")
    items = list(value)
    bad = [v for v in items if not (isinstance(v, str) or (isinstance(v, type) and issubclass(v, torch.nn.Module)))]
    if bad:
        raise ValueError(f"FSDPStrategy({arg}=...) holds {bad[0]!r}, which is neither an nn.Module class nor a "
                         "class name; e.g. {Block} or ['Block'].")
    return frozenset(items)


def is_sharded(module: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return any(isinstance(m, FSDPModule) for m in module.modules())


def on_meta(module: torch.nn.Module) -> bool:
    return any(t.is_meta for t in (*module.parameters(), *module.buffers()))


def materialize(module: torch.nn.Module, device: torch.device) -> None:
    """Allocate a meta-device model (each rank only its shards) and give it values.

    The outermost modules with ``init_weights()`` (torchtitan's convention, the bundled GPT has one) initialise
    their whole subtree; elsewhere each module's own ``reset_parameters()`` runs.
    """
    module.to_empty(device=device)
    covered: list[str] = []
    with torch.no_grad():
        for name, m in module.named_modules():
            if not any(_within(name, c) for c in covered) and callable(getattr(m, "init_weights", None)):
                m.init_weights()
                covered.append(name)
        for name, m in module.named_modules():
            if not any(_within(name, c) for c in covered) and callable(getattr(m, "reset_parameters", None)):
                m.reset_parameters()


def _within(name: str, prefix: str) -> bool:
    return prefix == "" or name == prefix or name.startswith(prefix + ".")


class FSDPStrategy(ParallelStrategy):
    """FSDP2 over the mesh's data-parallel dimensions: ``dp_shard`` (full sharding), or ``dp_replicate`` x
    ``dp_shard`` (hybrid sharding); ``tp`` when the Module's ``configure_model`` applies a tensor-parallel plan.

    The process-group arguments (``process_group_backend``, ``timeout``, ``max_restarts``,
    ``shutdown_timeout``) and the degrees (``dp_replicate``, ``dp_shard``, ``tp``) are ``ParallelStrategy``'s.
    """

    name = "fsdp"
    # the module, sharded over the processes: it stays so between calls (Lightning's FSDP leaves it too)
    module_stays_on_device = True
    layout_preset = MeshLayout(dp_replicate=1, dp_shard=-1)
    layout_dims = ("dp_replicate", "dp_shard", "cp", "tp")

    def __init__(
        self,
        sharding_strategy: str = "FULL_SHARD",
        shard_size: int | None = None,
        reshard_after_forward: bool | int | None = None,
        auto_wrap_policy: Any = None,
        activation_checkpointing_policy: Any = None,
        cpu_offload: bool = False,
        state_dict_type: str = "sharded",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        sharding_strategy = str(sharding_strategy).upper()
        if sharding_strategy not in SHARDING_STRATEGIES:
            raise ValueError(f"{type(self).__name__}(sharding_strategy={sharding_strategy!r}) is not valid; use one "
                             f"of {', '.join(SHARDING_STRATEGIES)}.")
        if state_dict_type not in STATE_DICT_TYPES:
            raise ValueError(f"{type(self).__name__}(state_dict_type={state_dict_type!r}) is not valid; use 'sharded' "
                             "(a directory, every rank writes its shards) or 'full' (one file written by rank 0).")
        if shard_size is not None and (isinstance(shard_size, bool) or not isinstance(shard_size, int)
                                       or shard_size < 1):
            raise ValueError(f"{type(self).__name__}(shard_size={shard_size!r}) must be an int >= 1 (processes per "
                             "shard group) or None (processes per node).")
        if shard_size is not None and sharding_strategy != "HYBRID_SHARD":
            raise ValueError(f"{type(self).__name__}(shard_size={shard_size}) only applies to "
                             "sharding_strategy='HYBRID_SHARD'; remove it or set that strategy.")
        if reshard_after_forward is not None and not (isinstance(reshard_after_forward, bool) or (
                isinstance(reshard_after_forward, int) and reshard_after_forward >= 2)):
            raise ValueError(f"{type(self).__name__}(reshard_after_forward={reshard_after_forward!r}) must be True, "
                             "False, or an int >= 2 (reshard to a smaller group of that size).")
        if not isinstance(cpu_offload, bool):
            raise ValueError(f"{type(self).__name__}(cpu_offload={cpu_offload!r}) must be True or False.")
        if sharding_strategy == "SHARD_GRAD_OP" and reshard_after_forward is None:
            reshard_after_forward = False
        self.sharding_strategy = sharding_strategy
        # what the engine reads (a subclass may show the public attributes in another form, e.g. torch's enums)
        self._sharding = sharding_strategy
        self._offload_params = cpu_offload
        self.shard_size = shard_size
        self.reshard_after_forward = True if reshard_after_forward is None else reshard_after_forward
        self.auto_wrap_policy = _policy(auto_wrap_policy, "auto_wrap_policy")
        self.activation_checkpointing_policy = _policy(activation_checkpointing_policy,
                                                       "activation_checkpointing_policy")
        self.cpu_offload = cpu_offload
        self.state_dict_type = state_dict_type
        self._roots: list[torch.nn.Module] = []

    # --- placement checks -------------------------------------------------------------------------
    def _check_backend(self) -> None:
        super()._check_backend()
        acc = self.accelerator
        cp = self._layout_request().resolve(self.world_size).cp if "cp" in self._degrees else 1
        if cp > 1:
            from plugins.strategies.context_parallel import check_context_parallel  # local import: cp runs only

            check_context_parallel(cp, self.root_device.type if acc is not None else "cpu")
        if self._offload_params and acc is not None and acc.name == "cpu":
            raise ValueError(
                f"{type(self).__name__}(cpu_offload=True) with accelerator='cpu': the parameters already live in CPU "
                "memory, so there is nothing to offload. Remove cpu_offload, or train on GPUs (accelerator='cuda')."
            )
        if self._sharding == "HYBRID_SHARD":
            shard = self._shard_size()
            if self.world_size % shard:
                raise ValueError(
                    f"{type(self).__name__}(sharding_strategy='HYBRID_SHARD', shard_size={shard}) needs the world size "
                    f"({self.world_size}) to be a multiple of shard_size; use one of "
                    f"{', '.join(str(d) for d in range(1, self.world_size + 1) if self.world_size % d == 0)}."
                )

    def _shard_size(self) -> int:
        return self.shard_size or max(1, len(self.device_ids))

    def _layout_request(self) -> MeshLayout:
        """``HYBRID_SHARD``: shard within ``shard_size`` processes (default: a node), replicate across them."""
        if self._sharding == "HYBRID_SHARD" and not {"dp_replicate", "dp_shard"} & set(self._degrees):
            return replace(super()._layout_request(), dp_replicate=-1, dp_shard=self._shard_size())
        return super()._layout_request()

    def _fsdp_mesh(self) -> Any:
        """The part of the mesh FSDP shards (and, for hybrid sharding, replicates) over; with context parallel,
        ``dp_shard x cp`` flattened (cp ranks hold the same parameters and average their gradients too)."""
        mesh = self.device_mesh
        if mesh is not None and "cp" in (mesh.mesh_dim_names or ()):
            from plugins.strategies.mesh_flatten import flattened  # local import: cp runs only

            outer = "dp_replicate" if "dp_replicate" in mesh.mesh_dim_names else None
            return flattened(mesh, ("dp_shard", "cp"), "dp_shard_cp", outer)
        return submesh(mesh, "dp_replicate", "dp_shard")

    def forward_backward(self, step_fn: Any, batch: Any, batch_idx: int, backward: Any) -> torch.Tensor | None:
        """With context parallel: the step (forward and backward) under ring attention on this rank's sequence slice."""
        if self.device_mesh is None or "cp" not in (self.device_mesh.mesh_dim_names or ()):
            return super().forward_backward(step_fn, batch, batch_idx, backward)
        from plugins.strategies.context_parallel import context_parallel_step  # local import: cp runs only

        with context_parallel_step(self.device_mesh["cp"], batch):
            return super().forward_backward(step_fn, batch, batch_idx, backward)

    # --- the module ----------------------------------------------------------------------------------
    def _fsdp_kwargs(self) -> dict[str, Any]:
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy

        kwargs: dict[str, Any] = {"mesh": self._fsdp_mesh(), "reshard_after_forward": self.reshard_after_forward}
        precision = self.precision
        if getattr(precision, "name", "").endswith("-mixed"):  # parameters gathered in half, gradients reduced in fp32
            kwargs["mp_policy"] = MixedPrecisionPolicy(param_dtype=precision.dtype, reduce_dtype=torch.float32)
        if self._offload_params:
            kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=self.root_device.type == "cuda")
        return kwargs

    def setup_module(self, module: torch.nn.Module) -> torch.nn.Module:
        if not any(p.requires_grad for p in module.parameters()):
            raise ValueError(
                f"{type(self).__name__}: {type(module).__name__} has no trainable parameters, so there is nothing to "
                "shard. Create the layers in __init__ or configure_model, or use strategy='ddp' / 'single_device' for "
                "a model without parameters."
            )
        module = self.precision.convert_module(module)
        meta = on_meta(module)
        if not meta:
            module = module.to(self.root_device)
        if not is_sharded(module):
            self._shard(module)
        self._roots = fsdp_roots(module)
        if meta:
            materialize(module, self.root_device)
        self.module = module
        return module

    def _shard(self, module: torch.nn.Module) -> None:
        own = [n for n, _ in module.named_parameters(recurse=False)]
        if own:
            raise ValueError(
                f"{type(self).__name__}: parameters registered directly on {type(module).__name__} ({', '.join(own)}) "
                "cannot be sharded: FSDP gathers parameters in a submodule's forward. Move them into a submodule "
                "(e.g. self.model = nn.Module subclass), or apply fully_shard yourself in configure_model."
            )

        if self.activation_checkpointing_policy and getattr(self.model_transforms, "checkpointing", None):
            raise ValueError(f"{type(self).__name__}(activation_checkpointing_policy=...) and the Trainer's "
                             "activation_checkpointing=... both ask for activation checkpointing; keep one (the "
                             "Trainer's also offers selective checkpointing).")
        apply_activation_checkpointing(module, self.activation_checkpointing_policy)
        self.apply_model_transforms(module)  # after tensor parallel (configure_model), before fully_shard
        roots = [child for child in module.children() if any(True for _ in child.parameters())]
        apply_fsdp(module, roots, self.auto_wrap_policy, **self._fsdp_kwargs())

    def tensor_init_context(self, empty_init: bool | None = None) -> contextlib.AbstractContextManager:
        """Not on the device: the whole model would have to fit there before it is sharded. ``empty_init=True``:
        on the meta device, materialised shard by shard in ``setup_module``."""
        device = torch.device("meta") if empty_init else None
        return tensor_init_context(device, self.precision.tensor_init_context(), empty_init=False)

    def evaluation_context(self) -> contextlib.AbstractContextManager:
        """``no_grad``, not ``inference_mode``: FSDP's gather buffers outlive evaluation and training reuses them,
        which inference tensors forbid."""
        return torch.no_grad()

    def no_backward_sync(self, enabled: bool) -> contextlib.AbstractContextManager:
        if not enabled or not self._roots:
            return contextlib.nullcontext()
        return _no_gradient_sync(self._roots)

    def clip_gradients_by_norm(self, params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
        """The norm over all shards: norms per (mesh, placement) group, combined, then one scale."""
        groups = grads_by_mesh(params)
        total = total_grad_norm(groups)
        for group in groups.values():  # one foreach per mesh: DTensor ops do not mix meshes
            torch.nn.utils.clip_grads_with_norm_(group, max_norm, total)
        return total

    def teardown(self) -> None:
        self._roots = []
        super().teardown()

    # --- checkpoints ---------------------------------------------------------------------------------
    def _full_options(self) -> Any:
        from torch.distributed.checkpoint.state_dict import StateDictOptions

        return StateDictOptions(full_state_dict=True, cpu_offload=True)

    def module_state_dict(self, module: torch.nn.Module) -> dict[str, Any]:
        if self.state_dict_type == "sharded":
            return module.state_dict()
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        return get_model_state_dict(module, options=self._full_options())

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        module = self._state_module()
        if self.state_dict_type == "sharded":
            return optimizer_state_by_name(optimizer.state_dict(), optimizer, module)
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        return get_optimizer_state_dict(module, optimizer, options=self._full_options())

    def load_module_state_dict(self, module: torch.nn.Module, state: Any, strict: bool = True) -> None:
        if isinstance(state, ShardedState):
            return super().load_module_state_dict(module, state, strict)
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        set_model_state_dict(module, state, options=StateDictOptions(full_state_dict=True, strict=strict))

    def load_optimizer_state_dict(self, optimizer: torch.optim.Optimizer, state: Any) -> None:
        if isinstance(state, ShardedState):
            return super().load_optimizer_state_dict(optimizer, state)
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        module = self._state_module()
        state = optimizer_state_by_name(state, optimizer, module)
        set_optimizer_state_dict(module, optimizer, state, options=StateDictOptions(full_state_dict=True))

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str, layout_keys: tuple[str, ...] = ()) -> None:
        if self.state_dict_type == "full":
            return super().save_checkpoint(checkpoint, path, layout_keys)
        save_sharded(checkpoint, path, self, layout_keys)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(accelerator={self.accelerator!r}, precision={self.precision!r}, "
                f"world_size={self.world_size}, sharding_strategy={self.sharding_strategy!r})")


def fsdp_roots(top: torch.nn.Module) -> list[torch.nn.Module]:
    """The outermost FSDP modules: turning gradient sync off on them turns it off everywhere."""
    from torch.distributed.fsdp import FSDPModule

    modules = dict(top.named_modules())
    sharded = [n for n, m in modules.items() if isinstance(m, FSDPModule)]
    return [modules[n] for n in sharded if not any(o != n and (o == "" or n.startswith(o + ".")) for o in sharded)]


@contextlib.contextmanager
def _no_gradient_sync(roots: list[torch.nn.Module]):
    for root in roots:
        root.set_requires_gradient_sync(False)
    try:
        yield
    finally:
        for root in roots:
            root.set_requires_gradient_sync(True)


def grads_by_mesh(params: list[torch.Tensor]) -> dict[Any, list[torch.Tensor]]:
    """Parameters grouped by their gradient's mesh and placements (plain tensors by device)."""
    from torch.distributed.tensor import DTensor

    groups: dict[Any, list[torch.Tensor]] = {}
    for p in params:
        g = p.grad
        key = (id(g.device_mesh), tuple(g.placements)) if isinstance(g, DTensor) else ("local", g.device)
        groups.setdefault(key, []).append(p)
    return groups


def total_grad_norm(groups: dict[Any, list[torch.Tensor]], norm_type: float = 2.0) -> torch.Tensor:
    """The global gradient norm when gradients are DTensors on different meshes (FSDP, TP, or both)."""
    from torch.distributed.tensor import DTensor

    norms = []
    for params in groups.values():
        norm = torch.nn.utils.get_total_norm([p.grad for p in params], norm_type)
        if isinstance(norm, DTensor):
            norm = norm.full_tensor()
        norms.append(norm.float())
    if not norms:
        return torch.tensor(0.0)
    device = norms[0].device
    return torch.linalg.vector_norm(torch.stack([n.to(device) for n in norms]), norm_type)
