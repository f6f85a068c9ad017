"""Turning the Trainer's plugin arguments into plugin objects, with "auto" decided in one place.

``choose`` is a pure function of the arguments, what the launcher reports (``LaunchInfo``) and what
the machine has (``Hardware``), so its rules are tested by a table. ``resolve_plugins`` probes the
machine, runs ``choose`` and builds the objects through the registry. Every error is raised here,
before any process is started or any work is done.
"""

from __future__ import annotations

import difflib
import os
from typing import Any, NamedTuple

from plugins.accelerators.base import Accelerator
from plugins.accelerators.cuda import CUDAAccelerator
from plugins.accelerators.mps import MPSAccelerator
from plugins.accelerators.rocm import ROCmAccelerator
from plugins.accelerators.xpu import XPUAccelerator
from plugins.builtin import PRECISION_ALIASES
from plugins.environments.detect import detect_environment
from plugins.precision.base import Precision
from plugins.errors import MisconfigurationError, MissingRequirementError
from plugins.registry import UnknownPluginError, default_registry
from plugins.strategies import horovod_available
from plugins.strategies.base import Strategy
from plugins.strategies.horovod_available import INSTALL_COMMAND, horovod_missing_message

GPU_KINDS = ("cuda", "rocm", "xpu", "mps")  # the order "auto" and "gpu" prefer
# accelerators Lightning knows by name that Relay cannot run: the name is valid, the hardware never available here
UNRUNNABLE = {"tpu": ("XLAAccelerator", "torch_xla>=1.13")}
# Lightning's names for its accelerators' classes, which its "not available" message names
_CLASS_NAMES = {"cpu": "CPUAccelerator", "cuda": "CUDAAccelerator", "mps": "MPSAccelerator",
                "rocm": "ROCmAccelerator", "xpu": "XPUAccelerator"}
# the precision values Lightning's Trainer accepts, as its error lists them
_LIGHTNING_PRECISIONS = ("transformer-engine", "transformer-engine-float16", "16-true", "16-mixed", "bf16-true",
                         "bf16-mixed", "32-true", "64-true", 64, 32, 16, "64", "32", "16", "bf16")


class Hardware(NamedTuple):
    """Device counts per accelerator kind (CPU excluded) and whether bf16 works on the GPU.

    This and the other records here are NamedTuples: a frozen dataclass compiles its methods from source when it is
    defined (3 M instructions each, valgrind), and every Trainer defines these."""

    cuda: int = 0
    rocm: int = 0
    xpu: int = 0
    mps: int = 0
    gpu_bf16: bool = True
    cpu_count: int = 1
    others: tuple[tuple[str, int], ...] = ()  # third-party accelerators: (name, device count)

    def count(self, kind: str) -> int:
        if kind == "cpu":
            return self.cpu_count
        if kind in GPU_KINDS:
            return getattr(self, kind)
        return dict(self.others).get(kind, 0)

    @classmethod
    def probe(cls) -> Hardware:
        counts = {
            name: acc.device_count() if acc.is_available() else 0
            for name, acc in (("cuda", CUDAAccelerator), ("rocm", ROCmAccelerator), ("xpu", XPUAccelerator),
                              ("mps", MPSAccelerator))
        }
        bf16 = True
        if counts["cuda"] or counts["rocm"]:
            import torch

            bf16 = torch.cuda.is_bf16_supported()
        return cls(**counts, gpu_bf16=bf16, cpu_count=os.cpu_count() or 1)


class LaunchInfo(NamedTuple):
    """What the launcher reports: who started the processes and how many there are."""

    environment: str = "local"
    external: bool = False  # processes were started by torchrun / srun / mpirun / a PyTorchJob
    world_size: int = 1
    processes_per_node: int = 1
    num_nodes: int = 1
    horovod: bool = False  # started by horovodrun
    horovod_importable: bool = False  # ``import horovod.torch`` would work in this Python
    elastic: bool = False  # the engine chose how many processes, up to the devices asked for (Ray's min_workers)

    @classmethod
    def from_environment(cls, env: Any) -> LaunchInfo:
        if not env.creates_processes_externally:
            return cls(environment=env.name, horovod_importable=horovod_available.horovod_importable())
        return cls(
            environment=env.name,
            external=True,
            world_size=env.world_size(),
            processes_per_node=env.local_world_size(),
            num_nodes=env.num_nodes(),
            horovod=bool(getattr(env, "is_horovod", False)),
            horovod_importable=horovod_available.horovod_importable(load=bool(getattr(env, "is_horovod", False))),
            elastic=bool(getattr(env, "elastic", False)),
        )


class Choice(NamedTuple):
    """What ``choose`` settled on."""

    accelerator: str
    device_ids: tuple[int, ...]
    num_nodes: int
    strategy: str
    precision: str
    note: str = ""  # why "auto" chose what it did, when that may surprise (printed once by resolve_plugins)

    @property
    def world_size(self) -> int:
        return len(self.device_ids) * self.num_nodes


def _unknown(arg: str, value: Any, valid: list[str] | tuple[str, ...]) -> ValueError:
    close = difflib.get_close_matches(str(value), list(valid), n=3, cutoff=0.5)
    near = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return ValueError(f"Trainer({arg}={value!r}) is not valid.{near} Valid: {', '.join(valid)}.")


def normalize_precision(precision: Any) -> str:
    text = str(precision)
    return PRECISION_ALIASES.get(text, text)


def _choose_accelerator(accelerator: str, hw: Hardware) -> str:
    available = [k for k in GPU_KINDS if hw.count(k) > 0]
    if accelerator == "auto":
        return available[0] if available else "cpu"
    if accelerator == "gpu":
        if not available:
            raise MisconfigurationError(
                "No supported gpu backend found! Trainer(accelerator='gpu') but this machine has no GPU (CUDA, ROCm, "
                "XPU or MPS). Use accelerator='cpu' or 'auto'.")
        return available[0]
    if accelerator in UNRUNNABLE:
        cls_name, requirement = UNRUNNABLE[accelerator]
        # Lightning's error where the package is missing (its class is built before availability is asked)
        raise MissingRequirementError(
            f"Requirement {requirement!r} not met. HINT: Try running `pip install -U {requirement!r}`. "
            f"(Trainer(accelerator={accelerator!r}): Relay has no {cls_name} backend; use accelerator='cuda', "
            "'cpu' or 'auto'.)")
    if accelerator != "cpu" and hw.count(accelerator) == 0:
        have = ", ".join(["cpu", *available])
        cls_name = _CLASS_NAMES.get(accelerator, accelerator)
        raise MisconfigurationError(
            f"`{cls_name}` can not run on your system since the accelerator is not available. The following "
            f"accelerator(s) is available and can be passed into `accelerator` argument of `Trainer`: "
            f"{['cpu', *available]}. Trainer(accelerator={accelerator!r}) but no {accelerator} device is available "
            f"on this machine (available: {have}). Use accelerator='auto' or one of those."
        )
    return accelerator


def check_devices_given(devices: Any, accelerator: Any) -> None:
    """``devices=0``, ``"0"`` or ``[]`` asks for no device at all: refused before the hardware is asked (Lightning's
    words first, naming the accelerator as given)."""
    if isinstance(devices, bool) or devices not in ([], 0, "0"):
        return
    name = type(accelerator).__qualname__ if isinstance(accelerator, Accelerator) else accelerator
    raise MisconfigurationError(
        f"`Trainer(devices={devices!r})` value is not a valid input using {name} accelerator. "
        f"Trainer(devices={devices!r}) must be >= 1 (or -1 for all devices), a list of device indices, or 'auto'."
    )


def parse_devices(devices: Any, kind: str, hw: Hardware, launch: LaunchInfo) -> tuple[int, ...]:
    """Indices from ``1``, ``[0, 1]``, ``"0,1"``, ``-1`` or ``"auto"`` (one per process on this node)."""
    usage = "use an int, a list of indices, '0,1', -1 or 'auto'"
    if isinstance(devices, str) and devices.strip() != "auto":
        text = devices.strip()
        try:
            devices = [int(x) for x in text.split(",") if x.strip()] if "," in text else int(text)
        except ValueError:
            raise ValueError(f"Trainer(devices={devices!r}) is not valid: {usage}.") from None
    available = hw.count(kind)
    if devices == "auto":
        count = launch.processes_per_node if launch.external else (available if kind in GPU_KINDS else 1)
        indices = tuple(range(count))
    elif isinstance(devices, bool) or not isinstance(devices, (int, list, tuple)):
        raise ValueError(f"Trainer(devices={devices!r}) is not valid: {usage}.")
    elif isinstance(devices, int):
        if devices == -1:
            indices = tuple(range(available))
        elif devices < 1:
            raise ValueError(f"Trainer(devices={devices}) must be >= 1 (or -1 for all devices).")
        else:
            indices = tuple(range(devices))
    else:
        indices = tuple(int(i) for i in devices)
        if not indices or len(set(indices)) != len(indices) or min(indices) < 0:
            raise ValueError(f"Trainer(devices={list(devices)}) must list distinct indices >= 0.")
    if kind != "cpu" and max(indices) >= available:
        raise ValueError(
            f"Trainer(devices={devices!r}) asks for {kind} device(s) {list(indices)}, but this machine has "
            f"{available} {kind} device(s). Use devices={available} (or -1 for all)."
        )
    if kind == "cpu" and not launch.external and len(indices) > available:
        # on the CPU a device is a process: more than the cores is allowed (e.g. to test a layout), but slow
        import warnings

        warnings.warn(
            f"Trainer(accelerator='cpu', devices={devices!r}) starts {len(indices)} processes on a machine with "
            f"{available} CPU core(s): they share the cores and each step is slower. Use devices<={available} "
            "unless that is what you want.", UserWarning, stacklevel=2
        )
    return indices


def choose(
    accelerator: str = "auto",
    devices: Any = "auto",
    num_nodes: int = 1,
    strategy: str = "auto",
    precision: Any = "32-true",
    launch: LaunchInfo | None = None,
    hardware: Hardware | None = None,
) -> Choice:
    """The concrete accelerator, devices, nodes, strategy and precision for these arguments."""
    launch = launch or LaunchInfo()
    hw = hardware or Hardware()
    if num_nodes == "auto":  # an elastic job: as many nodes as the launcher joined this time
        num_nodes = launch.num_nodes if launch.external else 1
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
        raise ValueError(f"Trainer(num_nodes={num_nodes!r}) must be an int >= 1, or 'auto'.")
    check_devices_given(devices, accelerator)
    kind = _choose_accelerator(accelerator, hw)
    device_ids = parse_devices(devices, kind, hw, launch)
    if launch.external and launch.elastic and len(device_ids) * num_nodes >= launch.world_size:
        device_ids, num_nodes = device_ids[: launch.processes_per_node], launch.num_nodes  # what the engine placed
    elif launch.external and (len(device_ids) != launch.processes_per_node or num_nodes != launch.num_nodes):
        raise ValueError(
            f"Trainer(devices={devices!r}, num_nodes={num_nodes}) disagrees with the launcher "
            f"({launch.environment}: {launch.world_size} processes, {launch.processes_per_node} per node on "
            f"{launch.num_nodes} node(s)). Use devices={launch.processes_per_node}, num_nodes={launch.num_nodes} "
            "(or devices='auto')." + (" LOCAL_RANK is set, so another launcher started this process: export RANK and "
                                      "WORLD_SIZE with it, or unset LOCAL_RANK to let Relay start the processes."
                                      if launch.environment == "local" else "")
        )
    world = len(device_ids) * num_nodes
    strategy, note = _choose_strategy(strategy, devices, num_nodes, len(device_ids), launch)
    if kind == "mps" and world > 1:
        raise ValueError("Trainer(accelerator='mps') has one device and no collective backend; use devices=1.")
    name = _check_precision(precision, kind, hw)
    return Choice(kind, device_ids, num_nodes, strategy, name, note)


def _choose_strategy(strategy: str, devices: Any, num_nodes: int, per_node: int, launch: LaunchInfo,
                     ) -> tuple[str, str]:
    """``"auto"`` decided (single device, DDP, or Horovod under horovodrun), and the strategy checked against the
    number of processes; a note to warn with when ``"auto"`` had to fall back."""
    world, note = per_node * num_nodes, ""
    if strategy == "auto":
        strategy = "single_device" if world == 1 else "ddp"
        if launch.horovod and launch.horovod_importable:
            strategy = "horovod"
        elif launch.horovod:
            note = (f"Started by horovodrun, but Horovod is not importable here, so strategy='auto' chose {strategy!r} "
                    f"(torch.distributed over horovodrun's processes). For Horovod: {INSTALL_COMMAND}")
    if strategy == "horovod":
        if not launch.horovod_importable:
            raise ValueError(horovod_missing_message("Trainer(strategy='horovod')"))
        if not launch.external and num_nodes > 1:
            raise ValueError(
                f"Trainer(strategy='horovod', num_nodes={num_nodes}): Relay starts Horovod workers on this machine only; "
                f"start them on every host with `horovodrun -np {world} -H host1:{per_node},host2:{per_node},... "
                "python train.py`."
            )
    if strategy == "single_device" and world > 1:
        raise ValueError(
            f"Trainer(strategy='single_device') runs one process, but devices={devices!r} x num_nodes={num_nodes} "
            f"asks for {world}. Use strategy='ddp' (or 'auto'), or devices=1."
        )
    return strategy, note


def _check_precision(precision: Any, kind: str, hw: Hardware) -> str:
    """The precision's canonical name, refused where the hardware cannot run it."""
    name = normalize_precision(precision)
    if name.startswith("bf16") and kind in ("cuda", "rocm") and not hw.gpu_bf16:
        raise ValueError(
            f"Trainer(precision={precision!r}) needs bf16, which this {kind} GPU does not support. "
            "Use precision='16-mixed'."
        )
    if name == "64-true" and kind == "mps":
        raise ValueError("Trainer(precision='64-true') is not supported on MPS (no float64). Use '32-true'.")
    return name


def resolve_plugins(
    accelerator: str | Accelerator = "auto",
    devices: Any = "auto",
    num_nodes: int = 1,
    strategy: str | Strategy = "auto",
    precision: str | int | Precision = "32-true",
    environment: Any = None,
) -> Strategy:
    """Probe, choose, and build: the strategy, holding its accelerator, precision and environment."""
    if isinstance(strategy, Strategy) and getattr(strategy, "_parallel_devices", None):
        accelerator, devices = _from_parallel_devices(strategy, accelerator, devices)
    registry = default_registry()
    if environment is None and isinstance(strategy, Strategy):  # ``DDPStrategy(cluster_environment=...)``
        environment = strategy.environment
    env = environment if environment is not None and not isinstance(environment, str) else (
        registry.create("environment", environment) if isinstance(environment, str) else detect_environment()
    )
    hw = _probe(accelerator, registry)
    acc_name = accelerator.name if isinstance(accelerator, Accelerator) else accelerator
    strategy_name = strategy.name if isinstance(strategy, Strategy) else strategy
    if not isinstance(strategy, Strategy) and strategy != "auto":
        registry.get("strategy", strategy, "strategy")
    prec_name = precision.name if isinstance(precision, Precision) else precision
    if not isinstance(precision, Precision):
        _check_precision_name(precision, registry)
    check_devices_given(devices, accelerator)  # before the hardware's answer, as Lightning
    launch = LaunchInfo.from_environment(env)
    choice = choose(acc_name, devices, num_nodes, strategy_name or "auto", prec_name, launch, hw)
    env.validate_settings(len(choice.device_ids), choice.num_nodes)  # the launcher's own words for a mismatch
    if choice.note and (not launch.external or env.global_rank() == 0):
        import warnings

        warnings.warn(choice.note, stacklevel=3)

    if strategy == "auto" and not registry.has("strategy", choice.strategy):
        raise ValueError(
            f"Trainer(devices={devices!r}, num_nodes={num_nodes}) needs {choice.world_size} processes and so the "
            f"{choice.strategy!r} strategy, which is not installed (registered: {', '.join(registry.names('strategy'))}). "
            "Use devices=1, num_nodes=1."
        )
    acc = accelerator if isinstance(accelerator, Accelerator) else registry.create("accelerator", choice.accelerator)
    device_type = "cuda" if acc.name == "rocm" else acc.name  # autocast's name for the hardware
    prec = _build_precision(precision, choice.precision, device_type, registry)
    strat = strategy if isinstance(strategy, Strategy) else registry.create("strategy", choice.strategy)
    strat.connect(accelerator=acc, precision=prec, environment=env, device_ids=list(choice.device_ids),
                  num_nodes=choice.num_nodes)
    return strat


def _from_parallel_devices(strategy: Strategy, accelerator: Any, devices: Any) -> tuple[Any, Any]:
    """A strategy given ``parallel_devices`` decides the accelerator type (another one asked for is Lightning's error)
    and, unless ``devices`` is given, the devices: their indices on a GPU, their number on the CPU."""
    found = strategy._parallel_devices
    kind = found[0].type
    name = accelerator.name if isinstance(accelerator, Accelerator) else accelerator
    allowed = {"cpu": ("auto", "cpu"), "cuda": ("auto", "cuda", "gpu")}.get(kind)
    if allowed is None:
        return accelerator, devices
    if name is not None and name not in allowed:
        raise MisconfigurationError(
            f"{'CPU' if kind == 'cpu' else 'GPU'} parallel_devices set through {type(strategy).__name__} class, but "
            f"accelerator set to {name}, please choose one device type")
    if devices == "auto":
        devices = len(found) if kind == "cpu" else [d.index or 0 for d in found]
    return (kind if not isinstance(accelerator, Accelerator) else accelerator), devices


def _check_precision_name(precision: Any, registry: Any) -> None:
    """An unknown precision value: Lightning's words first, then the registry's suggestions."""
    try:
        registry.get("precision", normalize_precision(precision), "precision")
    except UnknownPluginError as err:
        raise UnknownPluginError(
            f"Precision {precision!r} is invalid. Allowed precision values: {_LIGHTNING_PRECISIONS}. {err}") from None


def _known_accelerator(accelerator: str, registry: Any) -> Any:
    """The registered class of ``accelerator``; an unknown name is refused in Lightning's words, then the
    registry's suggestions."""
    try:
        return registry.get("accelerator", accelerator, "accelerator").load()
    except UnknownPluginError as err:
        names = ", ".join(["auto", *UNRUNNABLE, *registry.names("accelerator")])
        raise UnknownPluginError(f"You selected an invalid accelerator name: `accelerator={accelerator!r}`. "
                                 f"Available names are: {names}. {err}") from None


def _probe(accelerator: str | Accelerator, registry: Any) -> Hardware:
    """What the machine has; a third-party accelerator (by name or object) answers for its own devices."""
    hw = Hardware.probe()
    acc_name = accelerator.name if isinstance(accelerator, Accelerator) else accelerator
    if isinstance(accelerator, str) and accelerator in UNRUNNABLE:
        return hw._replace(others=((accelerator, 0),))
    if not isinstance(accelerator, Accelerator) and accelerator not in ("auto", "gpu"):
        cls = _known_accelerator(accelerator, registry)  # unknown: suggestions
        if accelerator != "cpu" and accelerator not in GPU_KINDS:
            hw = hw._replace(others=((accelerator, cls.device_count() if cls.is_available() else 0),))
    elif isinstance(accelerator, Accelerator) and acc_name not in ("cpu", *GPU_KINDS):
        hw = hw._replace(others=((acc_name, accelerator.device_count() if accelerator.is_available() else 0),))
    return hw


def _build_precision(precision: str | int | Precision, name: str, device_type: str, registry: Any) -> Precision:
    """The precision object for the chosen ``name``, bound to the accelerator's autocast device type."""
    if isinstance(precision, Precision):
        if getattr(precision, "device_type", "") is None:  # built without one (from a config): the accelerator's
            precision.bind_device_type(device_type)
        return precision
    if name == "16-mixed" and device_type == "cpu":  # as Lightning: no fp16 autocast on the CPU
        import warnings

        warnings.warn(
            f"Trainer(accelerator='cpu', precision={precision!r}): fp16 mixed precision is not supported on the "
            "CPU; using precision='bf16-mixed' instead (pass precision='bf16-mixed' to silence this).",
            stacklevel=4,
        )
        name = "bf16-mixed"
    entry = registry.get("precision", name)
    extra = {"device_type": device_type} if name.endswith("-mixed") else {}
    return entry.create(**extra)
