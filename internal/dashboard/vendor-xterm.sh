#!/bin/sh
# vendor-xterm.sh fetches the pinned xterm.js from the npm registry (npm pack) and copies
# the files the dashboard embeds, with the package's licence, into assets/vendor/xterm.
# Run it from anywhere; the result is committed, so building needs neither npm nor a network.
set -eu
VERSION=5.5.0
here=$(cd "$(dirname "$0")" && pwd)
out="$here/assets/vendor/xterm"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@xterm/xterm@$VERSION" >/dev/null && tar -xzf xterm-xterm-$VERSION.tgz)
mkdir -p "$out"
cp "$tmp/package/lib/xterm.js" "$tmp/package/css/xterm.css" "$tmp/package/LICENSE" "$out/"
echo "@xterm/xterm $VERSION" > "$out/VERSION"
