#!/bin/bash
# Relay on a Spark cluster through pyspark's TorchDistributor (pyspark 4.x, Java 17+). spark-submit runs
# Relay's CLI as the driver; launcher.local_mode=false runs the NPROC processes as barrier tasks on the
# executors (one GPU each). The run directory must be on storage every executor sees (checkpoints and
# the status files that name a failing rank are written there).
#   SPARK_MASTER=spark://head:7077 NPROC=8 bash templates/launch/spark_cluster.sh [overrides]
# Without a cluster, `python -m trainer launcher=spark trainer.devices=2` runs locally (local mode).
set -euo pipefail
: "${SPARK_MASTER:?set SPARK_MASTER, e.g. spark://head:7077 or yarn}"
NPROC="${NPROC:-4}"

OVERRIDES=(
  accelerator=cuda
  strategy=ddp
  launcher=spark
  launcher.local_mode=false
  trainer.devices="${NPROC}"
  trainer.num_nodes=1
)

spark-submit --master "${SPARK_MASTER}" \
  --conf spark.task.resource.gpu.amount=1 \
  --conf spark.executor.resource.gpu.amount=1 \
  "$(python -c 'import trainer.__main__ as m; print(m.__file__)')" "${OVERRIDES[@]}" "$@"
