#!/usr/bin/env bash
# check-disk.sh DIR MARGIN_GIB: fail with a clear message when the filesystem holding DIR
# has less free space than an agent's eviction threshold (nodefs.available<5%, see
# internal/agent.EvictionHard) plus MARGIN_GIB. Below that, every test cluster's kubelet
# evicts its pods for disk pressure and the tests fail far from the cause.
set -euo pipefail
dir=${1:-/tmp}
margin_gib=${2:-8}
read -r size avail < <(df --output=size,avail -B1 "$dir" | tail -1)
need=$(( size / 20 + margin_gib * 1024 * 1024 * 1024 ))
if (( avail < need )); then
	gib() { echo "$(( $1 / 1024 / 1024 / 1024 )) GiB"; }
	echo "error: $dir has $(gib "$avail") free of $(gib "$size"); the tests need $(gib "$need"):" >&2
	echo "  5% of the disk (below it an agent evicts its pods) plus $margin_gib GiB for the" >&2
	echo "  tests' clusters, images and build cache. Free some space (go clean -cache) and retry." >&2
	exit 1
fi
