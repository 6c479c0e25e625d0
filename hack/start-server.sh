#!/usr/bin/env bash
# start-server.sh BIN DATA_DIR LOG PIDFILE [server flags...]
# Starts `mizzen server` in the background and returns once the cluster is usable:
# /readyz answers, the bundled node is Ready, and the server is still running a few
# seconds later. A server that exits at any point before that (also after /readyz, as a
# component failing late takes the bundle down) is reported with the log's last lines,
# and the script fails.
set -uo pipefail
BIN=$1 DATA_DIR=$2 LOG=$3 PIDFILE=$4
shift 4

nohup "$BIN" server --data-dir "$DATA_DIR" "$@" > "$LOG" 2>&1 &
pid=$!
echo "$pid" > "$PIDFILE"
kc=(--kubeconfig "$DATA_DIR/admin.kubeconfig")

died() {
  echo "mizzen server exited ($1); the last lines of $LOG:" >&2
  tail -20 "$LOG" >&2
  rm -f "$PIDFILE"
  exit 1
}
alive() { kill -0 "$pid" 2>/dev/null; }

# /readyz, within 2 minutes.
for _ in $(seq 1 1200); do
  alive || died "before /readyz"
  if [ -f "$DATA_DIR/admin.kubeconfig" ] && "$BIN" kubectl "${kc[@]}" get --raw /readyz >/dev/null 2>&1; then break; fi
  sleep 0.1
done
"$BIN" kubectl "${kc[@]}" get --raw /readyz >/dev/null 2>&1 || { alive || died "before /readyz"; echo "mizzen server not ready after 2 minutes; see $LOG" >&2; exit 1; }

# The node, unless the agent is disabled, within 2 more minutes.
if ! [[ " $* " =~ --disable[=\ ][^\ ]*agent ]]; then
  for _ in $(seq 1 240); do
    alive || died "after /readyz, before its node was Ready"
    if "$BIN" kubectl "${kc[@]}" get nodes --no-headers 2>/dev/null | grep -q ' Ready'; then break; fi
    sleep 0.5
  done
fi

# Still up a moment later: components that fail on their first requests have by now.
for _ in $(seq 1 30); do
  alive || died "after /readyz"
  sleep 0.1
done
"$BIN" kubectl "${kc[@]}" get --raw /readyz >/dev/null 2>&1 || { alive || died "after /readyz"; echo "mizzen server stopped answering /readyz; see $LOG" >&2; exit 1; }
