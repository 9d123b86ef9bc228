#!/usr/bin/env bash
# The quantization decision read through pass^k and the failure taxonomy (benchmarks/results/reliability.md):
# Qwen2.5-Coder 1.5B at Q4_K_M (installed), q4_0 and q3_k_s, temperature 0.7, five seeded repeats per episode, on
# RouteEval's 12 prompts, upstream CallNavi (two domains, 50 questions, routing task) and MobilityBench (agentic,
# JSON-constrained, 10 episodes). Long (hours on two CPU cores): not part of the tests.
#
#   scripts/reliability.sh WORKDIR CALLNAVI_DATA
#
# WORKDIR receives quant.yaml, the requantized GGUFs and the comparison folders; a stopped comparison goes on with
# `rig compare --resume ID --out WORKDIR/runs`.
set -euo pipefail
work=${1:?WORKDIR}
callnavi=${2:?CALLNAVI_DATA (the upstream CallNavi folder)}
mkdir -p "$work"
cd "$work"
for q in q4_0 q3_k_s; do
    grep -q "qwen2.5-coder-1.5b-$q:" quant.yaml 2>/dev/null \
        || rig models quantize qwen2.5-coder-1.5b --to "$q" --models quant.yaml
done
variants=(qwen2.5-coder-1.5b qwen2.5-coder-1.5b-q4_0 qwen2.5-coder-1.5b-q3_k_s)
common=(--models quant.yaml --temperature 0.7 --repeats 5 --seed 0 --pass-k 1,3,5 --out runs)
rig compare "${variants[@]}" -b routeeval "${common[@]}"
# CallNavi's routing task: its parameter task scores AST 0.00 for every variant at temperature 0
# (quant_decision.md), and would double the hours for a pass^k of 0 throughout; add -O task=params to run it.
rig compare "${variants[@]}" -b callnavi --data "$callnavi" -O domains=gov,hr -O task=routing --limit 50 "${common[@]}"
# MobilityBench samples at its own temperature option (the paper's 0.1) whatever the run's: set it too
rig compare "${variants[@]}" -b mobilitybench --decode json --limit 10 -O temperature=0.7 "${common[@]}"
