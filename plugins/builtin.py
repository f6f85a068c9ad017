"""Relay's own plugins and their short names (one class may appear under several names)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plugins.registry import Registry

ACCELERATORS = {
    "cpu": ("plugins.accelerators.cpu:CPUAccelerator", "The CPU; collectives over gloo"),
    "cuda": ("plugins.accelerators.cuda:CUDAAccelerator", "NVIDIA GPUs through torch.cuda; collectives over NCCL"),
    "rocm": ("plugins.accelerators.rocm:ROCmAccelerator", "AMD GPUs through torch.cuda on ROCm; RCCL via 'nccl'"),
    "xpu": ("plugins.accelerators.xpu:XPUAccelerator", "Intel GPUs through torch.xpu; collectives over XCCL"),
    "mps": ("plugins.accelerators.mps:MPSAccelerator", "Apple silicon GPU through torch.mps (one device)"),
}
STRATEGIES = {
    "single_device": ("plugins.strategies.single_device:SingleDeviceStrategy", "One process on one device", {}),
    "ddp": ("plugins.strategies.ddp:DDPStrategy", "DistributedDataParallel: one process per device, gradients averaged",
            {}),
    "ddp_find_unused_parameters_true": ("plugins.strategies.ddp:DDPStrategy",
                                        "DDP that tolerates parameters unused in a step", {"find_unused_parameters": True}),
    "ddp_find_unused_parameters_false": ("plugins.strategies.ddp:DDPStrategy",
                                         "DDP that expects every parameter to get a gradient (Lightning's name)",
                                         {"find_unused_parameters": False}),
    **{f"{kind}_find_unused_parameters_{flag}": (
        "plugins.strategies.ddp_spawn:DDPSpawnStrategy",
        f"{kind} with find_unused_parameters={flag.capitalize()} (Lightning's name)",
        {"find_unused_parameters": flag == "true", **({} if kind == "ddp_spawn" else {"start_method": "fork"})})
       for kind in ("ddp_spawn", "ddp_fork", "ddp_notebook") for flag in ("false", "true")},
    "ddp_spawn": ("plugins.strategies.ddp_spawn:DDPSpawnStrategy",
                  "DDP with workers spawned from the running process; results come back to it (no re-run)", {}),
    "ddp_notebook": ("plugins.strategies.ddp_spawn:DDPSpawnStrategy",
                     "DDP with forked workers, for notebooks and interactive sessions", {"start_method": "fork"}),
    "ddp_fork": ("plugins.strategies.ddp_spawn:DDPSpawnStrategy", "The same as ddp_notebook",
                 {"start_method": "fork"}),
    "fsdp": ("plugins.strategies.fsdp:FSDPStrategy", "FSDP2 fully_shard: parameters, gradients, optimizer state sharded",
             {}),
    "fsdp_cpu_offload": ("plugins.strategies.fsdp:FSDPStrategy",
                         "FSDP2 with parameters, gradients and optimizer state offloaded to the CPU (Lightning's name)",
                         {"cpu_offload": True}),
    "fsdp_hybrid": ("plugins.strategies.fsdp:FSDPStrategy",
                    "FSDP2 hybrid: sharded within a node, replicated across nodes", {"sharding_strategy": "HYBRID_SHARD"}),
    "deepspeed": ("plugins.strategies.deepspeed:DeepSpeedStrategy",
                  "DeepSpeed ZeRO 1/2/3 (optional extra relaytrain[deepspeed]): sharded optimizer/gradients/weights",
                  {}),
    # Lightning's names for DeepSpeed presets
    "deepspeed_stage_1": ("plugins.strategies.deepspeed:DeepSpeedStrategy", "DeepSpeed ZeRO stage 1", {"stage": 1}),
    "deepspeed_stage_1_offload": ("plugins.strategies.deepspeed:DeepSpeedStrategy", "DeepSpeed ZeRO stage 1, optimizer offloaded to the CPU",
                                  {"stage": 1, "offload_optimizer": True}),
    "deepspeed_stage_2": ("plugins.strategies.deepspeed:DeepSpeedStrategy", "DeepSpeed ZeRO stage 2", {"stage": 2}),
    "deepspeed_stage_2_offload": ("plugins.strategies.deepspeed:DeepSpeedStrategy", "DeepSpeed ZeRO stage 2, optimizer offloaded to the CPU",
                                  {"stage": 2, "offload_optimizer": True}),
    "deepspeed_stage_3": ("plugins.strategies.deepspeed:DeepSpeedStrategy", "DeepSpeed ZeRO stage 3", {"stage": 3}),
    "deepspeed_stage_3_offload": ("plugins.strategies.deepspeed:DeepSpeedStrategy", "DeepSpeed ZeRO stage 3, optimizer and parameters offloaded to the CPU",
                                  {"stage": 3, "offload_optimizer": True, "offload_parameters": True}),
    "deepspeed_stage_3_offload_nvme": ("plugins.strategies.deepspeed:DeepSpeedStrategy", "DeepSpeed ZeRO stage 3, optimizer and parameters offloaded to NVMe",
                                       {"stage": 3, "offload_optimizer": True, "offload_parameters": True,
                                        "remote_device": "nvme", "offload_params_device": "nvme",
                                        "offload_optimizer_device": "nvme"}),
    "model_parallel": ("plugins.strategies.model_parallel:ModelParallelStrategy",
                       "Tensor parallel x FSDP2 data parallel on one 2-D device mesh", {}),
    "horovod": ("plugins.strategies.horovod:HorovodStrategy",
                "Horovod under horovodrun/mpirun: hvd.DistributedOptimizer, collectives on hvd.*", {}),
    "torchft": ("plugins.strategies.torchft:TorchFTStrategy",
                "torchft replica groups (optional extra relaytrain[torchft]): a failed group drops out, rejoins healed",
                {}),
    "pipeline": ("plugins.strategies.pipeline:PipelineStrategy",
                 "Pipeline stages (torch.distributed.pipelining schedules), x DDP/FSDP/TP on one mesh", {}),
}
PRECISION = {
    "32-true": ("plugins.precision.base:Precision", "Full fp32", {}),
    "64-true": ("plugins.precision.half:TruePrecision", "Module and tensors in fp64", {"precision": "64-true"}),
    "16-mixed": ("plugins.precision.half:MixedPrecision", "fp16 autocast, gradient scaling on GPUs",
                 {"precision": "16-mixed"}),
    "bf16-mixed": ("plugins.precision.half:MixedPrecision", "bf16 autocast, fp32 weights",
                   {"precision": "bf16-mixed"}),
    "bf16-true": ("plugins.precision.half:TruePrecision", "Module and tensors in bf16", {"precision": "bf16-true"}),
    "16-true": ("plugins.precision.half:TruePrecision", "Module and tensors in fp16", {"precision": "16-true"}),
    "fp8-mixed": ("plugins.precision.float8:Float8Precision",
                  "Linear matmuls in float8 (torchao; FP8 GPUs), bf16 autocast elsewhere", {}),
}
# Lightning's short forms of precision names
PRECISION_ALIASES = {"32": "32-true", "64": "64-true", "16": "16-mixed", "bf16": "bf16-mixed", "half": "16-true"}
ENVIRONMENTS = {
    "local": ("plugins.environments.local:LocalEnvironment", "Nothing launched yet: Relay starts the processes"),
    "torchelastic": ("plugins.environments.torchelastic:TorchElasticEnvironment", "Started by torchrun / torch elastic"),
    "slurm": ("plugins.environments.slurm:SLURMEnvironment", "Started by srun in a SLURM job"),
    "mpi": ("plugins.environments.mpi:MPIEnvironment", "Started by mpirun / mpiexec / horovodrun"),
    "lsf": ("plugins.environments.lsf:LSFEnvironment", "Started by jsrun in an IBM Spectrum LSF job"),
    "kubernetes": ("plugins.environments.kubernetes:KubernetesEnvironment", "A Kubeflow PyTorchJob pod"),
    "ray": ("plugins.environments.ray:RayEnvironment", "A Ray Train worker (TorchTrainer)"),
}


def register_builtins(registry: Registry) -> None:
    for name, (target, description) in ACCELERATORS.items():
        registry.register("accelerator", name, target, description)
    for name, (target, description, defaults) in STRATEGIES.items():
        registry.register("strategy", name, target, description, **defaults)
    for name, (target, description, defaults) in PRECISION.items():
        registry.register("precision", name, target, description, **defaults)
    for name, (target, description) in ENVIRONMENTS.items():
        registry.register("environment", name, target, description)
