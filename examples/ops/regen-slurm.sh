#!/bin/bash
# regen on a Slurm array: task I of N regenerates part I of N of the prompts (regen reads
# SLURM_ARRAY_TASK_ID, _COUNT, _MIN, _MAX and _STEP itself, so --array=0-15, 1-16 and
# 0-60:4 all make parts 0..N-1; a list such as 1,3,7 is refused), every task on
# its own node with its own servers, all writing one run in a bucket. A task that is stopped
# (time limit, preemption, a node lost, a failure a rerun gets past) is requeued, and resumes
# its part exactly once. Edit the paths, the model and the array size, then: sbatch regen-slurm.sh
#SBATCH --job-name=regen
#SBATCH --array=0-15
#SBATCH --nodes=1
#SBATCH --gres=gpu:8
#SBATCH --time=12:00:00
#SBATCH --requeue
#SBATCH --signal=B:TERM@120
#SBATCH --output=regen-%A_%a.log
set -uo pipefail

REGEN=${REGEN:-regen}
FLEET=/tmp/regen-fleet-${SLURM_JOB_ID}.json
STAGING=/local/regen-staging/${SLURM_ARRAY_TASK_ID}

"$REGEN" serve --engine sglang --model /models/target --fleet "$FLEET" || exit $?
trap '"$REGEN" serve --stop "$FLEET"' EXIT

"$REGEN" generate --prompts s3://data/prompts.jsonl --output-dir s3://data/runs/exp1 --fleet "$FLEET" --staging-dir "$STAGING" &
pid=$!
# --signal=B:TERM@120 reaches this shell 2 minutes before the time limit: pass it on, so
# that generate lets its requests in flight finish and exits 143.
trap 'kill -TERM "$pid"' TERM
wait "$pid"
code=$?
if [ "$code" -gt 128 ] && kill -0 "$pid" 2>/dev/null; then
    wait "$pid"  # the wait above ended on the signal: this one returns generate's own code
    code=$?
fi

case "$code" in
    0) ;;  # done: completions and recorded errors account for every prompt of this part
    2|3|4) echo "regen generate exited $code: fix what it says, then sbatch again" >&2 ;;
    *) scontrol requeue "${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}" ;;  # resumes its part
esac
exit "$code"
