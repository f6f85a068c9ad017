#!/bin/bash
# Relay training with Horovod: horovodrun starts one process per GPU on each host; Relay detects it
# (HOROVOD_RANK / OMPI_COMM_WORLD_RANK) and launches nothing itself.
#   HOSTS=node0:4,node1:4 bash templates/launch/horovodrun.sh [overrides]
set -euo pipefail
HOSTS="${HOSTS:-localhost:4}"
GPUS_PER_NODE="${GPUS_PER_NODE:-4}"
NNODES="${NNODES:-1}"
NP=$((GPUS_PER_NODE * NNODES))

# Relay overrides: the Horovod strategy on GPUs, one shared run directory for all ranks.
OVERRIDES=(
  accelerator=cuda
  strategy=horovod
  environment=mpi
  trainer.devices="${GPUS_PER_NODE}"
  trainer.num_nodes="${NNODES}"
  hydra.run.dir="relay_logs/horovod-${RUN_ID:-run}"
)

horovodrun -np "${NP}" -H "${HOSTS}" python -m trainer "${OVERRIDES[@]}" "$@"
