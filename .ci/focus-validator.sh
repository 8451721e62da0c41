#!/usr/bin/env bash
# Prepares the FinOps Foundation's FOCUS validator (focus-validator 2.2.1, FOCUS 1.2 rules) in
# its own virtual environment, for tests/reports/test_focus_validator.py; does nothing when it
# is already there with the pinned requirements (.ci/focus-validator-requirements.txt).
# The validator needs Python 3.12 or later (the project runs on 3.11, where its code does not
# even parse) and numpy < 2, whose wheels stop at Python 3.12: the script takes a Python 3.12 of
# this machine (FOCUS_VALIDATOR_PYTHON, PATH or pyenv), else a Python 3.13 (PATH or one it built
# before), else builds CPython 3.13 from the source tarball Debian serves. Measured on the shared
# 2-core machine: with a Python 3.12 there, 1 minute; else building CPython takes 3.5 to 6
# minutes, and numpy 1.26 compiles from source for 3.13 in 9 more (once: pip caches the wheel).
# Everything lands under CHARGEBACK_TOOLS_DIR (~/.cache/gpu-chargeback); the validator's
# environment is FOCUS_VALIDATOR_VENV (<tools>/focus-validator-2.2.1), where the test looks.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
tools="${CHARGEBACK_TOOLS_DIR:-$HOME/.cache/gpu-chargeback}"
venv="${FOCUS_VALIDATOR_VENV:-$tools/focus-validator-2.2.1}"
requirements="$here/focus-validator-requirements.txt"
stamp="$venv/.requirements.sha256"
want="$(sha256sum <"$requirements" | cut -d' ' -f1)"
if [ -x "$venv/bin/focus-validator" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    exit 0
fi

# CPython 3.13.5 as Debian trixie ships it (the .dsc's Checksums-Sha256 of the orig tarball)
cpython_version=3.13.5
cpython_sha256=93e583f243454e6e9e4588ca2c2662206ad961659863277afcdb96801647d640
cpython_url="http://deb.debian.org/debian/pool/main/p/python3.13/python3.13_${cpython_version}.orig.tar.xz"
built="$tools/python3.13/bin/python3.13"

usable() {  # a Python 3.12+ with the modules pip and the validator need
    [ -n "$1" ] && [ -x "$1" ] && "$1" -c \
        'import sys, ssl, sqlite3, lzma, bz2, ctypes, venv; sys.exit(sys.version_info < (3, 12))' \
        >/dev/null 2>&1
}

find_python() {
    local pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}" candidate
    for candidate in "${FOCUS_VALIDATOR_PYTHON:-}" "$(command -v python3.12 || true)" \
        "$pyenv_root"/versions/3.12.*/bin/python3.12 "$(command -v python3.13 || true)" \
        "$built"; do
        if usable "$candidate"; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

build_python() {
    local deps=(curl build-essential libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev
        libsqlite3-dev libreadline-dev) missing=() dep work started
    for dep in "${deps[@]}"; do
        dpkg -s "$dep" >/dev/null 2>&1 || missing+=("$dep")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        as_root apt-get update -qq
        DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    started=$SECONDS
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' RETURN
    echo "focus-validator: building CPython $cpython_version into $tools/python3.13" >&2
    curl -fsSL "$cpython_url" -o "$work/python.tar.xz"
    echo "$cpython_sha256  $work/python.tar.xz" | sha256sum -c --quiet
    tar -xf "$work/python.tar.xz" -C "$work"
    (
        cd "$work/Python-$cpython_version"
        ./configure --prefix="$tools/python3.13" --with-ensurepip=install >"$work/build.log" 2>&1
        make -j"$(nproc)" >>"$work/build.log" 2>&1
        make altinstall >>"$work/build.log" 2>&1
    ) || { tail -30 "$work/build.log" >&2; return 1; }
    echo "focus-validator: CPython built in $((SECONDS - started)) s" >&2
}

python="$(find_python)" || { build_python && python="$built" && usable "$python"; }
echo "focus-validator: installing focus-validator 2.2.1 with $python into $venv" >&2
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
echo "$want" >"$stamp"
