#!/usr/bin/env bash
# Fetches the datasets the kernels' tests train on, from PyPI only, and checks
# them against pinned hashes. Idempotent: a file already present with the right
# hash is left alone; one with a wrong hash is replaced.
#
# - digits.csv.gz: the 1,797 8x8 handwritten digits that scikit-learn ships in
#   its wheel (sklearn/datasets/data/digits.csv.gz). The wheel is downloaded
#   with pip (no install, no dependencies), the one file is taken out of it, and
#   its BLAKE2b-256 is checked. The file is identical in every platform's wheel,
#   so pip may pick whichever wheel suits this Python.
#
# Destination: ${TOUCHSTONE_DATA:-$HOME/.cache/touchstone/data}
set -euo pipefail

SKLEARN_VERSION="1.5.2"
DIGITS_BLAKE2B_256="57a469b180ddc1380145abad65de499dbd489b59c9b5f988138eeed835193c95"
DATA_DIR="${TOUCHSTONE_DATA:-$HOME/.cache/touchstone/data}"
PYTHON="${PYTHON:-python3}"

blake2b_256() {
	"$PYTHON" -c 'import hashlib, sys; print(hashlib.blake2b(open(sys.argv[1], "rb").read(), digest_size=32).hexdigest())' "$1"
}

mkdir -p "$DATA_DIR"
target="$DATA_DIR/digits.csv.gz"
if [[ -f "$target" && "$(blake2b_256 "$target")" == "$DIGITS_BLAKE2B_256" ]]; then
	echo "digits: $target present, hash verified"
	exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "digits: downloading the scikit-learn $SKLEARN_VERSION wheel from PyPI"
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$work" "scikit-learn==$SKLEARN_VERSION"
wheel="$(ls "$work"/scikit_learn-*.whl | head -n 1)"
"$PYTHON" - "$wheel" "$work/digits.csv.gz" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, open(sys.argv[2], "wb") as out:
    out.write(wheel.read("sklearn/datasets/data/digits.csv.gz"))
PY
actual="$(blake2b_256 "$work/digits.csv.gz")"
if [[ "$actual" != "$DIGITS_BLAKE2B_256" ]]; then
	echo "digits: BLAKE2b-256 is $actual, expected $DIGITS_BLAKE2B_256; not installing it" >&2
	exit 1
fi
mv "$work/digits.csv.gz" "$target"
echo "digits: wrote $target, hash verified"
