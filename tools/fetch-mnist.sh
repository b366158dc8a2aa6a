#!/usr/bin/env bash
# Downloads the full MNIST (60,000 training and 10,000 test digits, the four .gz files)
# into a folder and checks the SHA-256 of each. Chapter 04.
#
#   tools/fetch-mnist.sh <folder>
#   MNIST_MIRROR=file:///data/mnist tools/fetch-mnist.sh <folder>   (a copy tried first)
#   MNIST_DIR=<folder> build/release/bin/...     (or MnistDataset(split, "<folder>"))
#
# Files already there with the right checksum are kept. Each file is tried from the
# mirrors below in turn; one whose checksum is wrong is deleted, never used. Without
# network access it fails with a message: the bundled subset (data/mnist-10k) needs none.
set -euo pipefail

# $MNIST_MIRROR (a URL, file:// included) is tried first: a local or institutional copy.
mirrors=(
  ${MNIST_MIRROR:+"$MNIST_MIRROR"}
  "https://ossci-datasets.s3.amazonaws.com/mnist"       # PyTorch's (torchvision) mirror
  "https://storage.googleapis.com/cvdf-datasets/mnist"  # TensorFlow's mirror
  "https://yann.lecun.com/exdb/mnist"                   # the original site
)
# SHA-256 of the published files (the same values are pinned by torchvision-ruby, Guild AI
# and other public MNIST downloaders). Sizes: 9,912,422 / 28,881 / 1,648,877 / 4,542 bytes.
declare -A sha256=(
  [train-images-idx3-ubyte.gz]=440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609
  [train-labels-idx1-ubyte.gz]=3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c
  [t10k-images-idx3-ubyte.gz]=8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6
  [t10k-labels-idx1-ubyte.gz]=f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6
)
files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
       t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)

fail() {
  echo "fetch-mnist.sh: $1" >&2
  [[ $# -gt 1 ]] && echo "hint: $2" >&2
  exit 1
}

[[ $# -eq 1 && -n "$1" ]] || fail "usage: tools/fetch-mnist.sh <folder>" \
  "the folder is created if needed; the bundled 8,000/2,000 subset is in data/mnist-10k"
dir="$1"
mkdir -p "$dir" || fail "cannot create the folder $dir"

# ---- Tools: a downloader and a SHA-256 program ---------------------------------------------
if command -v curl >/dev/null; then
  download() { curl --fail --silent --show-error --location --connect-timeout 10 \
                    --max-time 600 --retry 2 --output "$2" "$1"; }
elif command -v wget >/dev/null; then
  download() {  # wget has no file:// scheme: a local mirror is a copy
    if [[ $1 == file://* ]]; then cp "${1#file://}" "$2"; return; fi
    wget --quiet --timeout=10 --tries=3 --output-document="$2" "$1"
  }
else
  fail "neither curl nor wget is installed" "apt-get install -y curl"
fi
if command -v sha256sum >/dev/null; then
  checksum() { sha256sum "$1" | cut -d' ' -f1; }
elif command -v shasum >/dev/null; then
  checksum() { shasum -a 256 "$1" | cut -d' ' -f1; }
else
  fail "no sha256sum or shasum to check the downloads with" "install coreutils"
fi

# ---- Download and check each file ------------------------------------------------------------
for file in "${files[@]}"; do
  want="${sha256[$file]}"
  target="$dir/$file"
  if [[ -f "$target" && "$(checksum "$target")" == "$want" ]]; then
    echo "$file: already there, checksum OK"
    continue
  fi
  tried=()
  for mirror in "${mirrors[@]}"; do
    part="$target.part"
    rm -f "$part"
    echo "$file: downloading from $mirror"
    if ! download "$mirror/$file" "$part" 2>"$dir/.fetch-error"; then
      tried+=("$mirror: $(tail -n 1 "$dir/.fetch-error")")  # the last retry's error
      rm -f "$part"
      continue
    fi
    got="$(checksum "$part")"
    if [[ "$got" != "$want" ]]; then
      # Mirrors have served HTML error pages and login walls with status 200.
      tried+=("$mirror: wrong SHA-256 $got (expected $want)")
      rm -f "$part"
      continue
    fi
    mv "$part" "$target"
    echo "$file: OK ($(wc -c < "$target") bytes, SHA-256 verified)"
    tried=()
    break
  done
  rm -f "$dir/.fetch-error"
  if [[ ! -f "$target" || "$(checksum "$target")" != "$want" ]]; then
    {
      echo "fetch-mnist.sh: could not get $file from any mirror:"
      for line in "${tried[@]}"; do echo "  - $line"; done
      echo "hint: offline? copy the four MNIST .gz files into $dir by hand (the checksums"
      echo "      are in this script), or use the bundled subset in data/mnist-10k"
    } >&2
    exit 1
  fi
done
echo "MNIST is in $dir: MNIST_DIR=$dir selects it"
