#!/bin/bash
# Multi-node Relay training with torchrun (c10d rendezvous). Run this on every node with the same
# MASTER_ADDR and RUN_ID; torchrun starts one process per GPU and Relay detects it (no second launch).
#   MASTER_ADDR=node0 NNODES=2 GPUS_PER_NODE=4 RUN_ID=exp1 bash templates/launch/torchrun_multinode.sh [overrides]
set -euo pipefail
: "${MASTER_ADDR:?set MASTER_ADDR to the address of the first node}"
NNODES="${NNODES:-2}"
GPUS_PER_NODE="${GPUS_PER_NODE:-4}"
RUN_ID="${RUN_ID:-relay}"
MASTER_PORT="${MASTER_PORT:-29500}"
# each rendezvous round publishes its own address: restarts and nodes that join work (docs/guides/elastic.md)
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE="${TORCH_DISABLE_SHARE_RDZV_TCP_STORE:-1}"

# Relay overrides: every rank uses relay_logs/torchrun-$RUN_ID (from TORCHELASTIC_RUN_ID) as its run dir.
OVERRIDES=(
  accelerator=cuda
  strategy=ddp
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
  --max-restarts=3 \
  -m trainer "${OVERRIDES[@]}" ckpt_path=last "$@"
