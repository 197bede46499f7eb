#!/usr/bin/env bash
# Prepare the previous commit's tree for the GPU check's before/after comparison (run_scripts/gpu_check.sh BASELINE):
# its vlm_r1/ and groundwork/ from git, and a COMMIT file naming it, in DIR (default ./.gpu_check_baseline, which git
# ignores). Run it where the repository's .git is; a device machine's copy of the working tree has none, so name the
# folder in the run's `carry` (docs/GPU_CHECK.md, "Running it").
#
#   bash run_scripts/gpu_check_baseline.sh REV [DIR]     # e.g. the last commit before the change being measured
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REV="${1:?usage: gpu_check_baseline.sh REV [DIR]}"
DIR="${2:-$ROOT/.gpu_check_baseline}"
COMMIT="$(git -C "$ROOT" rev-parse --verify "$REV^{commit}")"
rm -rf "$DIR" && mkdir -p "$DIR"
git -C "$ROOT" archive "$COMMIT" vlm_r1 groundwork | tar -x -C "$DIR"
echo "$COMMIT" >"$DIR/COMMIT"
echo "[gpu_check_baseline] $DIR: vlm_r1/ and groundwork/ of $COMMIT ($(du -sh "$DIR" | cut -f1))" >&2
