#!/bin/bash
# DeepSpeed ZeRO across nodes with torchrun (c10d rendezvous): run this on every node with the same
# MASTER_ADDR and RUN_ID. Relay creates the process group and DeepSpeed joins it (no `deepspeed` launcher,
# no hostfile). ZeRO stage and offload come from the strategy config; a full DeepSpeed JSON config can
# replace them: strategy.config=ds_config.json.
#   MASTER_ADDR=node0 NNODES=2 GPUS_PER_NODE=8 RUN_ID=exp1 STAGE=3 bash templates/launch/deepspeed_multinode.sh [overrides]
set -euo pipefail
: "${MASTER_ADDR:?set MASTER_ADDR to the address of the first node}"
NNODES="${NNODES:-2}"
GPUS_PER_NODE="${GPUS_PER_NODE:-8}"
RUN_ID="${RUN_ID:-relay}"
MASTER_PORT="${MASTER_PORT:-29500}"
# DeepSpeed builds a C++ op on first use, once per node and Python environment, under
# ~/.cache/relay/torch_extensions/ (set TORCH_EXTENSIONS_DIR to put it elsewhere, e.g. on local disk).

OVERRIDES=(
  accelerator=cuda
  strategy=deepspeed
  strategy.stage="${STAGE:-3}"
  precision=bf16-mixed
  environment=torchelastic
  trainer.devices="${GPUS_PER_NODE}"
  trainer.num_nodes="${NNODES}"
)

torchrun \
  --nnodes="${NNODES}" \
  --nproc-per-node="${GPUS_PER_NODE}" \
  --rdzv-backend=c10d \
  --rdzv-endpoint="${MASTER_ADDR}:${MASTER_PORT}" \
  --rdzv-id="${RUN_ID}" \
  -m trainer "${OVERRIDES[@]}" ckpt_path=last "$@"
