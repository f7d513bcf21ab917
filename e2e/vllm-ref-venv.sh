#!/usr/bin/env bash
# Build (or reuse) the reference virtualenv with vLLM 0.33.0, for the parity tier (tests/parity/).
# Prints the venv's python on stdout; progress goes to stderr. Never touches the project venv.
#
# What is installed, all pinned and all with --no-deps (vLLM's full dependency set is ~10 GB of
# CUDA kernels and servers the parity tier never runs):
#  * vllm==0.33.0 and torch==2.14.0 (PyPI's CUDA 13.0 wheel: imports without a GPU);
#  * the CUDA libraries that `import torch` loads. libtorch_cuda.so and libtorch_cpu.so list
#    them as DT_NEEDED, so each one is required: hiding any single one of these .so files makes
#    `import torch` fail (measured). cusolver, cuda-toolkit's other parts and triton are not;
#  * the pure-Python and small binary packages that vllm.engine.arg_utils, vllm.config and
#    vllm.entrypoints.cli.serve import, found by importing them until nothing was missing.
#
# The cache key covers the pins and the Python version, so editing a pin builds a new venv.
# The venv is built in a temporary directory and renamed into place only when the smoke import
# succeeded: an interrupted install never looks complete. A lock serialises concurrent callers.
set -euo pipefail

CACHE="${VLLMOP_CACHE:-$HOME/.cache/vllm-operator}/vllm-ref"
BASE_PYTHON="${VLLMOP_REF_BASE_PYTHON:-python3}"
export VLLM_TARGET_DEVICE=cpu PIP_DISABLE_PIP_VERSION_CHECK=1

TORCH_PINS="
torch==2.14.0
nvidia-cublas==13.1.1.3
nvidia-cuda-cupti==13.0.85
nvidia-cuda-nvrtc==13.0.88
nvidia-cuda-runtime==13.0.96
nvidia-cudnn-cu13==9.24.0.43
nvidia-cufft==12.0.0.61
nvidia-cufile==1.15.1.6
nvidia-curand==10.4.0.35
nvidia-cusparse==12.6.3.3
nvidia-cusparselt-cu13==0.8.1
nvidia-nccl-cu13==2.30.7
nvidia-nvjitlink==13.0.88
nvidia-nvshmem-cu13==3.4.5
typing_extensions==4.16.0
filelock==4.3.1
"
# Grouped by the import that needed them.
VLLM_PINS="
vllm==0.33.0
sympy==1.14.0
mpmath==1.3.0
networkx==3.6.1
numpy==2.4.6
packaging==26.4
pyyaml==6.0.4
regex==2026.11.19
psutil==7.2.2
py-cpuinfo==9.0.0
cachetools==8.0.2
cloudpickle==3.1.3
msgspec==0.23.0
cbor2==6.3.0
pybase64==1.5.1
pyzmq==27.3.0
pillow==13.0.0
pydantic==2.14.4
pydantic-core==2.50.5
annotated-types==0.8.0
typing-inspection==0.4.5
transformers==5.20.2
tokenizers==0.23.3
safetensors==0.8.0
huggingface-hub==2.4.0
tqdm==4.70.1
httpx2==2.16.2
httpcore2==2.16.2
h11==0.16.0
truststore==0.10.5
anyio==4.16.0
sniffio==1.3.1
idna==3.20
requests==2.34.2
urllib3==2.8.0
certifi==2026.10.19.post1
aiohttp==3.14.5
aiohappyeyeballs==2.7.1
aiosignal==1.4.0
attrs==26.1.0
frozenlist==1.8.0
multidict==7.2.1
propcache==0.5.4
yarl==1.25.1
openai==3.57.0
oss-harmony==0.0.11
fastapi==0.136.3
starlette==1.10.0
annotated-doc==0.0.7
prometheus-client==0.26.0
partial-json-parser==0.2.1.1.post7
uvloop==0.23.0
uvicorn==0.54.0
click==8.5.1
watchfiles==1.3.0
orjson==3.13.0
xgrammar==0.2.8
apache-tvm-ffi==0.1.11
llguidance==1.7.6
"
# What the parity probe imports; the smoke test after the install.
SMOKE='
import torch, vllm
import vllm.config, vllm.engine.arg_utils, vllm.entrypoints.cli.serve
assert vllm.__version__ == "0.33.0", vllm.__version__
assert torch.__version__.split("+")[0] == "2.14.0", torch.__version__
'

log() { printf '[vllm-ref-venv %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

command -v "$BASE_PYTHON" >/dev/null || die "step 'find python': no $BASE_PYTHON on PATH (set VLLMOP_REF_BASE_PYTHON)"
PYVER=$("$BASE_PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
case "$PYVER" in
  3.11 | 3.12 | 3.13 | 3.14) ;;
  *) die "step 'find python': vLLM 0.33.0 needs Python 3.11-3.14; $BASE_PYTHON is $PYVER" ;;
esac
SUM=$(printf '%s\n%s\n%s\n%s\n' "$TORCH_PINS" "$VLLM_PINS" "$SMOKE" "$(uname -m)" | sha256sum | cut -c1-12)
KEY="vllm-0.33.0-torch-2.14.0-py$PYVER-$SUM"
VENV="$CACHE/$KEY"

if [ -f "$VENV/.complete" ]; then
  echo "$VENV/bin/python"
  exit 0
fi

command -v flock >/dev/null || die "step 'lock': flock (util-linux) is not on PATH"
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
log "waiting for the install lock ($CACHE/.lock)"
flock 9
if [ -f "$VENV/.complete" ]; then # another caller finished it while we waited
  echo "$VENV/bin/python"
  exit 0
fi
rm -rf "$CACHE"/.build-* # left by an interrupted install (we hold the lock)
STAGE=$(mktemp -d "$CACHE/.build-XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
LOGDIR="$CACHE/logs"
mkdir -p "$LOGDIR"
T_START=$SECONDS
log "cold install of $KEY into $STAGE (~3 GB download, ~5.5 GB on disk)"

# step NAME CMD...: run CMD with its output in a log; on failure name the step, show the tail.
step() {
  local name=$1 t0=$SECONDS logf="$LOGDIR/$KEY.$1.log"
  shift
  log "step '$name' started"
  if ! "$@" >"$logf" 2>&1; then
    tail -25 "$logf" >&2
    die "step '$name' failed; full log: $logf"
  fi
  log "step '$name' done in $((SECONDS - t0))s"
}
pins() { printf '%s\n' "$1" | grep -v '^$'; }
pip_install() { "$STAGE/bin/python" -m pip install --no-deps --no-cache-dir --progress-bar off "$@"; }

step create-venv "$BASE_PYTHON" -m venv "$STAGE"
# shellcheck disable=SC2046 # one pin per word
step install-torch pip_install $(pins "$TORCH_PINS")
step import-torch "$STAGE/bin/python" -W ignore -c 'import torch; print(torch.__version__)'
# shellcheck disable=SC2046
step install-vllm pip_install $(pins "$VLLM_PINS")
step import-vllm "$STAGE/bin/python" -W ignore -c "$SMOKE"

ELAPSED=$((SECONDS - T_START))
"$STAGE/bin/python" -m pip freeze --all >"$STAGE/.frozen" 2>/dev/null
rm -rf "$VENV" # an incomplete one from an install killed between the rename and .complete
mv -T "$STAGE" "$VENV"
trap - EXIT
# python finds its prefix from where it now lives (pip's console scripts keep the build path
# in their shebangs, so use `python -m pip` on this venv).
"$VENV/bin/python" -c 'import os, sys; assert os.path.realpath(sys.prefix) == os.path.realpath(sys.argv[1])' "$VENV" ||
  die "step 'move into place': $VENV/bin/python does not see $VENV as its prefix"
printf 'installed %s in %ss\n' "$(date -u +%FT%TZ)" "$ELAPSED" >"$VENV/.complete"
log "cold install done in ${ELAPSED}s: $VENV"
echo "$VENV/bin/python"
