#!/usr/bin/env bash
# The real path's GPU checks on a CUDA machine, in priority order, each part time-boxed so that a
# hang in one leaves the others' results: environment and the CUDA conformance tests, real runs,
# mpc on the device, hook overhead, compressor timings. Writes at most 10 files to OUTDIR (logs and JSON);
# `python benchmarks/bench_gpu.py --from-json OUTDIR/*.json` renders them as Markdown.
# Usage: bash benchmarks/gpu_checks.sh OUTDIR  (env PARTS="runs controllers overhead compressors" picks parts;
# WORKLOADS (comma-separated) picks the runs' and overhead's workloads, RANKS the overhead's rank
# counts, SIZES the compressors' sizes, MPC_PARAMS the controllers' mpc options; STEPS, SYNTH_STEPS, REPEATS
# and the time boxes PYTEST_S, RUNS_S, CTRL_S, OVERHEAD_S, COMP_S size them;
# PACK=1 leaves one archive, OUTDIR/gpu_checks.tar.gz, instead of the separate files, for a machine
# that hands back only a few files per command)
set -uo pipefail
out=${1:?usage: gpu_checks.sh OUTDIR}
mkdir -p "$out"
work=$(mktemp -d)
export PYTHONUNBUFFERED=1 MPLBACKEND=Agg
# The checkout itself is importable whether or not it was installed (a machine image whose pip
# cannot make an editable install still runs every part).
repo=$(cd "$(dirname "$0")/.." && pwd)
export PYTHONPATH="$repo${PYTHONPATH:+:$PYTHONPATH}"
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  COMPCTL_TEST_GPU=1 timeout "${PYTEST_S:-120}" python3 -m pytest -q -x -p no:cacheprovider \
    tests/sim/compress/test_compress_conformance.py tests/realrun/test_devices.py
  echo "pytest rc=$?"; } > "$out/env_and_tests.log" 2>&1
for part in ${PARTS:-runs controllers overhead compressors}; do
  case $part in runs) t=${RUNS_S:-220};; controllers) t=${CTRL_S:-120};; overhead) t=${OVERHEAD_S:-170};; compressors) t=${COMP_S:-100};; esac
  timeout "$t" python3 benchmarks/bench_gpu.py --json "$out/$part.json" --work "$work/$part" \
    --only "$part" --steps "${STEPS:-60}" --synthetic-steps "${SYNTH_STEPS:-20}" --repeats "${REPEATS:-2}" \
    ${GPU_DEVICE:+--device "$GPU_DEVICE"} ${WORKLOADS:+--workloads "$WORKLOADS"} ${QUICK:+--quick} \
    ${RANKS:+--ranks "$RANKS"} ${SIZES:+--sizes "$SIZES"} ${MPC_PARAMS:+--controller-params "$MPC_PARAMS"} \
    > "$out/$part.log" 2>&1
  echo "$part rc=$?" >> "$out/$part.log"
done
if [ -n "${PACK:-}" ]; then
  # Only the files this script wrote go into the archive and are removed; nothing else in OUTDIR.
  made=(env_and_tests.log)
  for part in ${PARTS:-runs controllers overhead compressors}; do
    for f in "$part.json" "$part.log"; do [ -e "$out/$f" ] && made+=("$f"); done
  done
  tar czf "$out/gpu_checks.tar.gz" -C "$out" "${made[@]}" && (cd "$out" && rm -f -- "${made[@]}")
fi
