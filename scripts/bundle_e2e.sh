#!/usr/bin/env bash
# End to end across a simulated air gap: make a bundle for the embedded default here (needs network for pip), then
# with no network at all (unshare -n) install a fresh venv from the bundle alone and run `rig bench --limit 1` on every
# benchmark; each run must record the bundle's id. Prints the time of each step.
#
#   scripts/bundle_e2e.sh [WORKDIR] [extra `rig bundle create` flags, e.g. --no-build]
#   scripts/bundle_e2e.sh /tmp/e2e --require torch==2.13.0   # the CPU torch pin the README's first command uses
#   REUSE_BUNDLE=1 scripts/bundle_e2e.sh /tmp/e2e              # the lab side again on the bundle made before
#   MODEL=qwen2.5-coder-1.5b BENCHES=callnavi scripts/bundle_e2e.sh /tmp/e2e --benchmarks callnavi
#                                        # another model (its part wheels travel too) on the benchmarks named
#
# Needs root (or user namespaces) for unshare -n. The llama-cpp-python compile makes `create` take many minutes.
set -euo pipefail
WORK=${1:-/tmp/rig-bundle-e2e}
shift || true
BUNDLE=$WORK/bundle
VENV=$WORK/venv
MODEL=${MODEL:-gemma3-270m}
BENCHES=${BENCHES:-callnavi evgeoqa mobilitybench routeeval urbangeo}
stamp() { date +%s.%N; }
took() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }

t0=$(stamp)
if [ -n "${REUSE_BUNDLE:-}" ] && [ -f "$BUNDLE/MANIFEST.json" ]; then  # the lab side again, on the same bundle
    rm -rf "$VENV" "$WORK/boot" "$WORK/home" "$WORK/runs"
else
    rm -rf "$WORK" && mkdir -p "$WORK"
    python3 -m rig.cli bundle create "$BUNDLE" --models "$MODEL" "$@"
fi
t1=$(stamp)
BID=$(python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['bundle_id'])" "$BUNDLE/MANIFEST.json")
python3 -m rig.cli bundle verify "$BUNDLE" --expect "$BID"
t2=$(stamp)

# The lab: no network, a fresh HOME (no pip or rig cache from this machine), the bundle's registry and map packs.
unshare -n bash -s "$BUNDLE" "$VENV" "$WORK" "$BID" "$MODEL" "$BENCHES" <<'LAB'
set -euo pipefail
BUNDLE=$1 VENV=$2 WORK=$3 BID=$4 MODEL=$5 BENCHES=$6
ip link set lo up
export HOME=$WORK/home XDG_CACHE_HOME=$WORK/home/.cache PIP_NO_INDEX=1
# None of this machine's pip settings (find-links folders, mirrors, pip.conf) reach the lab's installs.
for v in $(env | sed -n 's/^\(PIP_[A-Z_]*\)=.*/\1/p'); do unset "$v"; done
export PIP_NO_INDEX=1 PIP_CONFIG_FILE=/dev/null
mkdir -p "$HOME"
stamp() { date +%s.%N; }
took() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$2"; }
a=$(stamp)
# As the bundle's README tells the lab: rig itself from the bundle alone, verify with it, then `rig bundle install`
# makes the venv the runs use (a second fresh venv, checked by `rig doctor`). Nothing of this machine's rig is used.
python3 -m venv "$WORK/boot"
"$WORK/boot/bin/pip" install --quiet --no-index --find-links "$BUNDLE/wheels" \
    "$(python3 -c "import json, sys; m = json.load(open(sys.argv[1])); print('rig[' + ','.join(m['extras']) + ']')" "$BUNDLE/MANIFEST.json")" \
    $(python3 -c "import json, sys; print(' '.join(json.load(open(sys.argv[1])).get('requires', [])))" "$BUNDLE/MANIFEST.json")
"$WORK/boot/bin/rig" bundle verify "$BUNDLE" --expect "$BID"
b=$(stamp)
"$WORK/boot/bin/rig" bundle install "$BUNDLE" --expect "$BID" --venv "$VENV"
c=$(stamp)
export RIG_MODELS=$BUNDLE/models.yaml RIG_PACKS=$BUNDLE/cache/packs
cd "$WORK"
for bench in $BENCHES; do
  s=$(stamp)
  "$VENV/bin/rig" bench --model "$MODEL" -b "$bench" --limit 1 --out "$WORK/runs" --no-report
  echo "bench $bench: $(took "$s" "$(stamp)") s"
done
"$VENV/bin/rig" bundle verify "$BUNDLE" --expect "$BID"  # the runs wrote nothing into the bundle
echo "offline: bootstrap install + verify $(took "$a" "$b") s; rig bundle install (fresh venv + doctor) $(took "$b" "$c") s"
LAB
t3=$(stamp)

python3 - "$WORK/runs" "$BID" "$BENCHES" <<'PY'
import json, sys
from pathlib import Path
runs = sorted(Path(sys.argv[1]).glob("*/manifest.json"))
want = len(sys.argv[3].split())
assert len(runs) == want, f"expected {want} runs, found {len(runs)}"
bad = [str(p) for p in runs if json.loads(p.read_text()).get("bundle_id") != sys.argv[2]]
assert not bad, f"runs without bundle id {sys.argv[2]}: {bad}"
print(f"{want} runs record bundle {sys.argv[2]}")
PY
du -sh "$BUNDLE"
echo "create: $(took "$t0" "$t1") s; verify: $(took "$t1" "$t2") s; offline install + benches: $(took "$t2" "$t3") s"
