#!/bin/bash
# Relay on a Ray cluster through Ray Train (TorchTrainer): run this where `ray status` works (the head
# node, or any machine with RAY_ADDRESS set). Ray places WORKERS workers, one GPU each; Relay's workers
# join the process group Ray made. Rank 0's metrics and checkpoint are reported to Ray (<run dir>/ray).
#   RAY_ADDRESS=auto WORKERS=8 bash templates/launch/ray_cluster.sh [overrides]
# Without a cluster, `python -m trainer launcher=ray trainer.devices=2` starts a local Ray instead.
set -euo pipefail
WORKERS="${WORKERS:-4}"
export RAY_ADDRESS="${RAY_ADDRESS:-auto}"

# One worker per GPU: trainer.devices x trainer.num_nodes = the number of Ray workers.
OVERRIDES=(
  accelerator=cuda
  strategy=ddp
  launcher=ray
  trainer.devices="${WORKERS}"
  trainer.num_nodes=1
)

python -m trainer "${OVERRIDES[@]}" "$@"
