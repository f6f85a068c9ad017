#!/bin/bash
# Relay training with Horovod: horovodrun starts one process per GPU on each host; Relay detects it
# (HOROVOD_RANK / OMPI_COMM_WORLD_RANK) and launches nothing itself. Horovod must be importable on every
# host: build it once per machine with `python -m trainer install-horovod`.
#   HOSTS=node0:4,node1:4 NNODES=2 GPUS_PER_NODE=4 bash templates/launch/horovodrun.sh [overrides]
#   ACCELERATOR=cpu GPUS_PER_NODE=2 bash templates/launch/horovodrun.sh   (2 CPU processes on this machine)
set -euo pipefail
GPUS_PER_NODE="${GPUS_PER_NODE:-4}"
NNODES="${NNODES:-1}"
HOSTS="${HOSTS:-localhost:${GPUS_PER_NODE}}"
NP=$((GPUS_PER_NODE * NNODES))

# Relay overrides: the Horovod strategy, one shared run directory for all ranks.
OVERRIDES=(
  accelerator="${ACCELERATOR:-cuda}"
  strategy=horovod
  environment=mpi
  trainer.devices="${GPUS_PER_NODE}"
  trainer.num_nodes="${NNODES}"
  hydra.run.dir="relay_logs/horovod-${RUN_ID:-run}"
)

horovodrun -np "${NP}" -H "${HOSTS}" "${PYTHON:-python}" -m trainer "${OVERRIDES[@]}" "$@"
