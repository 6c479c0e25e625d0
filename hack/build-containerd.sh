#!/usr/bin/env bash
# build-containerd.sh DIR [VERSION]
# Builds containerd, containerd-shim-runc-v2 and ctr of github.com/containerd/containerd/v2
# at VERSION (default v2.4.2) from the Go module proxy into DIR, static (CGO_ENABLED=0,
# without the btrfs, devmapper and zfs snapshotters, which need cgo), and prints the path
# of DIR/containerd. A DIR whose .version stamp says VERSION and that holds the three
# binaries is reused as it is.
#
# Why: Debian 12's containerd is 1.6, which ignores CRI's Mount.image, so image volumes
# (volumes[].image) need a containerd of 2.1 or later; `mizzen server|agent --containerd
# DIR/containerd` runs this one, with its shim (beside it, first in containerd's PATH).
# Cost: with a cold Go build cache, 20 minutes or more on a shared 2-core machine (the
# module and its dependencies, about 560 MB, are downloaded first: under 2 minutes); under a
# minute with a warm one (linking only). CONFORMANCE.md (ctrd12) has the figures.
# Progress goes to stderr; stdout is only the path.
set -euo pipefail
DIR=${1:?usage: build-containerd.sh DIR [VERSION]}
VERSION=${2:-v2.4.2}
MODULE=github.com/containerd/containerd/v2
BINARIES=(containerd containerd-shim-runc-v2 ctr)

reusable() {
  [ "$(cat "$DIR/.version" 2>/dev/null)" = "$VERSION" ] || return 1
  local b
  for b in "${BINARIES[@]}"; do [ -x "$DIR/$b" ] || return 1; done
}
if reusable; then
  echo "$DIR/containerd"
  exit 0
fi

export GOWORK=off CGO_ENABLED=0 GOFLAGS=-buildvcs=false
src_dir=$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^\s*"Dir": "\(.*\)",*$/\1/p')
[ -d "$src_dir" ] || { echo "cannot fetch $MODULE@$VERSION from the module proxy" >&2; exit 1; }
# The module cache is read-only; the build needs a module directory it can write go.sum
# updates into, so it works on a copy.
work=$(mktemp -d "${TMPDIR:-/tmp}/build-containerd.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$src_dir/." "$work/" && chmod -R u+w "$work"
# The version stamp, as containerd's own Makefile sets it (containerd --version, and the
# CRI version the kubelet reads to know the runtime mounts image volumes).
ldflags="-s -w -X $MODULE/version.Version=$VERSION -X $MODULE/version.Revision=$VERSION-goproxy -X $MODULE/version.Package=$MODULE"
mkdir -p "$DIR"
rm -f "$DIR/.version"
start=$SECONDS
echo "building containerd $VERSION into $DIR (a cold Go build cache takes long: see the header of $0)" >&2
# -trimpath: the copy's directory differs on every build, and without it every package
# of the module would miss the Go build cache for that reason alone.
(cd "$work" && go build -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags "$ldflags" -o "$DIR/" \
  ./cmd/containerd ./cmd/containerd-shim-runc-v2 ./cmd/ctr) >&2
echo "$VERSION" > "$DIR/.version"
echo "built containerd $VERSION in $((SECONDS - start)) s" >&2
echo "$DIR/containerd"
