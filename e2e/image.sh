#!/usr/bin/env bash
# Build (or reuse) the operator image with whichever container engine this machine has.
#
#   e2e/image.sh [build]   build or reuse the image; prints its reference on stdout
#   e2e/image.sh engine    prints the engine it uses: docker, podman or buildah
#
# Progress goes to stderr as "[image HH:MM:SS] ..." lines, with the build's wall time.
#
# The base is the Dockerfile's pinned PYTHON_IMAGE when the engine has it or can pull it. Where no
# registry is reachable, an equivalent base is made from Debian packages (mmdebstrap: bookworm's
# python3 3.11, pip, venv, `python` on PATH, CA certificates, useradd) and passed through the same
# PYTHON_IMAGE build argument; the Dockerfile stays an ordinary registry-based Dockerfile.
#
# Cache (VLLMOP_CACHE, default ~/.cache/vllm-operator/image): the made base as a tarball keyed by
# its recipe and the host's apt sources, and the built image as an archive keyed by a hash of the
# Dockerfile, the build context and the base. A hit loads the archive instead of building; only
# the latest archive per engine is kept. pip resolves the dependency ranges of pyproject.toml at
# build time, so a cached image keeps the versions of the day it was built.
#
# Environment: VLLMOP_IMAGE_ENGINE (force an engine), VLLMOP_BUILD_ISOLATION (podman/buildah
# isolation, default chroot: the OCI runtime needs cgroups that sandboxes often lack),
# VLLMOP_PULL_BASE=0 (do not try the registry for the pinned base).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CACHE="${VLLMOP_CACHE:-$HOME/.cache/vllm-operator}/image"
NAME=localhost/vllm-operator
APP_VERSION=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\} *$/\1/p' "$ROOT/charts/vllm-operator/Chart.yaml")
PINNED=$(sed -n 's/^ARG PYTHON_IMAGE=//p' "$ROOT/Dockerfile")
ISOLATION=${VLLMOP_BUILD_ISOLATION:-chroot}
# The made base: what python:3.11-slim-bookworm offers the Dockerfile (python3-pip brings `pip`,
# python-is-python3 brings `python`, passwd brings groupadd/useradd). No Recommends: no compilers.
BASE_SUITE=bookworm
BASE_PACKAGES=python3,python3-venv,python3-pip,python-is-python3,ca-certificates,passwd

log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }

detect_engine() {
  if [ -n "${VLLMOP_IMAGE_ENGINE:-}" ]; then echo "$VLLMOP_IMAGE_ENGINE"; return; fi
  # a docker client without a reachable daemon is no engine
  if command -v docker >/dev/null && docker info >/dev/null 2>&1; then echo docker; return; fi
  if command -v podman >/dev/null && podman info >/dev/null 2>&1; then echo podman; return; fi
  if command -v buildah >/dev/null; then echo buildah; return; fi
  die "no container engine (docker daemon, podman or buildah); 'make install-system' installs buildah"
}
ENGINE=$(detect_engine)

# --- the engine's verbs ---------------------------------------------------------------------------

has_image() {
  case $ENGINE in
    docker) docker image inspect "$1" >/dev/null 2>&1 ;;
    podman) podman image exists "$1" ;;
    buildah) buildah inspect --type image "$1" >/dev/null 2>&1 ;;
  esac
}

engine_build() { # engine_build CONTEXT TAG BUILD-ARGS...
  local context=$1 tag=$2; shift 2
  case $ENGINE in
    docker) docker build -t "$tag" "$@" "$context" ;;
    podman | buildah)
      # RUN steps reach the package index the way this host does: with its CA bundle and pip
      # configuration (read-only, used by the build stage only, never committed to a layer)
      local mounts=()
      [ -d /etc/ssl/certs ] && mounts+=(-v /etc/ssl/certs:/etc/ssl/certs:ro)
      [ -f /etc/pip.conf ] && mounts+=(-v /etc/pip.conf:/etc/pip.conf:ro)
      local cmd=(build); [ "$ENGINE" = buildah ] && cmd=(bud)
      # docker format: the OCI image config has no HEALTHCHECK, and the Dockerfile has one
      "$ENGINE" "${cmd[@]}" --format docker --isolation "$ISOLATION" --network host "${mounts[@]}" \
        -t "$tag" "$@" "$context" ;;
  esac
}

save_image() { # save_image REF FILE
  case $ENGINE in
    docker) docker save -o "$2" "$1" ;;
    podman) podman save --format oci-archive -o "$2" "$1" ;;
    buildah) buildah push -q "$1" "oci-archive:$2:$1" >/dev/null ;;
  esac
}

load_image() { # load_image FILE REF
  case $ENGINE in
    docker) docker load -q -i "$1" >/dev/null ;;
    podman) podman load -q -i "$1" >/dev/null ;;
    buildah) buildah pull -q "oci-archive:$1" >/dev/null ;;
  esac
  has_image "$2" || die "step 'load': $1 did not hold $2"
}

tag_image() { "$ENGINE" tag "$1" "$2" >/dev/null; }

image_tags() { # every NAME:TAG of a repository
  case $ENGINE in
    docker) docker images --format '{{.Repository}}:{{.Tag}}' "$1" ;;
    podman) podman images --format '{{.Repository}}:{{.Tag}}' --filter "reference=$1" ;;
    buildah) buildah images --format '{{.Name}}:{{.Tag}}' --filter "reference=$1" ;;
  esac
}

remove_image() { "$ENGINE" rmi "$1" >/dev/null 2>&1 || true; }

image_size() { # in MB, as the engine reports it
  case $ENGINE in
    buildah) buildah images --json "$1" | sed -n 's/.*"size": "\(.*\)".*/\1/p' | head -1 ;;
    *) echo "$(( $("$ENGINE" image inspect --format '{{.Size}}' "$1") / 1000000 )) MB" ;;
  esac
}

image_id() {
  case $ENGINE in
    buildah) buildah inspect --type image --format '{{.FromImageID}}' "$1" ;;
    *) "$ENGINE" image inspect --format '{{.Id}}' "$1" ;;
  esac
}

# --- the base ---------------------------------------------------------------------------------------

# Prints the base reference and, on a second line, what identifies its content for the image key.
# A made base is named by the hash of its recipe and only made (make_base) when a build needs it.
resolve_base() {
  if has_image "$PINNED"; then
    printf '%s\npinned:%s\n' "$PINNED" "$(image_id "$PINNED")"; return
  fi
  if [ "${VLLMOP_PULL_BASE:-1}" != 0 ] && timeout 60 "$ENGINE" pull -q "$PINNED" >/dev/null 2>&1; then
    log "pulled $PINNED"
    printf '%s\npinned:%s\n' "$PINNED" "$(image_id "$PINNED")"; return
  fi
  log "$PINNED is not here and cannot be pulled: using a base made from Debian packages"
  local sources key
  sources=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | grep -v '^#' || true)
  key=$(printf '%s\n%s\n%s\n' "$BASE_SUITE" "$BASE_PACKAGES" "$sources" | sha256sum | cut -c1-12)
  printf '%s\nmade:%s\n' "localhost/vllm-operator-base:$BASE_SUITE-$key" "$key"
}

make_base() { # make_base REF KEY: the made base in the engine's storage (tarball cached)
  local ref=$1 tarball="$CACHE/base-$BASE_SUITE-$2.tar" context t0=$SECONDS
  has_image "$ref" && return
  if [ ! -f "$tarball" ]; then
    command -v mmdebstrap >/dev/null || die "step 'base': $PINNED cannot be pulled and mmdebstrap is missing; run 'make install-system'"
    log "making the base: mmdebstrap $BASE_SUITE ($BASE_PACKAGES)"
    # --format=tar: mmdebstrap would otherwise guess the format from the name (.part: a directory)
    mmdebstrap --quiet --format=tar --variant=minbase --aptopt='Apt::Install-Recommends "false"' \
      --include="$BASE_PACKAGES" "$BASE_SUITE" "$tarball.part" >&2 || die "step 'base': mmdebstrap"
    mv "$tarball.part" "$tarball"
    find "$CACHE" -maxdepth 1 -name 'base-*.tar' ! -name "$(basename "$tarball")" -delete
    log "base made in $((SECONDS - t0))s ($(du -m "$tarball" | cut -f1) MB)"
  fi
  context=$(mktemp -d)
  ln "$tarball" "$context/rootfs.tar" 2>/dev/null || cp "$tarball" "$context/rootfs.tar"
  printf 'FROM scratch\nADD rootfs.tar /\nCMD ["python3"]\n' >"$context/Containerfile"
  engine_build "$context" "$ref" -f "$context/Containerfile" >&2 || die "step 'base': import"
  rm -rf "$context"
  log "base imported as $ref"
}

# --- the image ----------------------------------------------------------------------------------

# What `docker build .` sends (.dockerignore: pyproject.toml, README.md, operator/ without caches),
# and this script (how it builds).
context_digest() {
  cd "$ROOT"
  { printf '%s\n' Dockerfile .dockerignore pyproject.toml README.md e2e/image.sh
    find operator -type f ! -path '*/__pycache__/*' ! -path 'operator/*.egg-info/*'
  } | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12
}

cmd_build() {
  mkdir -p "$CACHE"
  # one build at a time per cache: a second caller waits, then finds the first one's image
  exec 9>"$CACHE/.lock"
  flock 9
  local base base_ref base_id key t0=$SECONDS
  base=$(resolve_base)
  base_ref=${base%%$'\n'*} base_id=${base#*$'\n'}
  key=$(printf '%s\n%s\n%s\n' "$(context_digest)" "$base_ref" "$base_id" | sha256sum | cut -c1-12)
  local ref="$NAME:in-$key" archive="$CACHE/vllm-operator-$ENGINE-$key.tar"
  if has_image "$ref"; then
    log "cached: $ref already in $ENGINE's storage"
  elif [ -f "$archive" ]; then
    load_image "$archive" "$ref"
    log "cached: loaded $ref from $archive in $((SECONDS - t0))s"
  else
    [ "${base_id%%:*}" = made ] && make_base "$base_ref" "${base_id#made:}"
    log "cold build of $ref with $ENGINE from $base_ref"
    engine_build "$ROOT" "$ref" --build-arg "PYTHON_IMAGE=$base_ref" >&2 || die "step 'build': $ENGINE build failed (log above)"
    log "built in $((SECONDS - t0))s"
    save_image "$ref" "$archive.part" && mv "$archive.part" "$archive"
    find "$CACHE" -maxdepth 1 -name "vllm-operator-$ENGINE-*.tar" ! -name "$(basename "$archive")" -delete
  fi
  # the version tag follows the latest build; older builds then have one tag left and go
  tag_image "$ref" "$NAME:$APP_VERSION"
  for old in $(image_tags "$NAME" | grep ':in-' | grep -v ":in-$key$" || true); do remove_image "$old"; done
  log "image $ref ($NAME:$APP_VERSION, $(image_size "$ref")) ready after $((SECONDS - t0))s"
  echo "$ref"
}

case "${1:-build}" in
  build) cmd_build ;;
  engine) echo "$ENGINE" ;;
  *) die "usage: e2e/image.sh [build|engine]" ;;
esac
