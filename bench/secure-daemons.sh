#!/usr/bin/env bash
# Four `gossipd run` daemons on 127.0.0.1 train digits (a quarter each)
# with D-PSGD on the complete graph, first plain, then with
# --secure-aggregation, until every member has closed ROUNDS rounds.
# Prints, for each run, the members' mean accuracy on their held-out
# splits, the bytes and messages each member sent per round, and the
# wall time per round.
#
#   bench/secure-daemons.sh            # ROUNDS=400 DELTA=100ms BIN=bin/gossipd
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/gossipd}
ROUNDS=${ROUNDS:-400}
DELTA=${DELTA:-100ms}
N=4
status() { curl -sf "http://$1/status"; }
for mode in plain secure; do
	dir=$(mktemp -d)
	extra=()
	[ "$mode" = secure ] && extra=(--secure-aggregation)
	read -r -a ports <<<"$(/usr/bin/python3 -c '
import socket
ss = [socket.socket() for _ in range(8)]
for s in ss: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in ss))')"
	pids=()
	boot=""
	for i in $(seq 0 $((N - 1))); do
		id=$("$BIN" keygen --out "$dir/n$i/identity.key")
		listen=/ip4/127.0.0.1/tcp/${ports[$((2 * i))]}
		args=(run --store "$dir/n$i" --listen "$listen" --api "127.0.0.1:${ports[$((2 * i + 1))]}"
			--shard "$i/$N" --delta "$DELTA" --lr 0.5 --mdns=false --dht off --log-format json
			--protocol dpsgd --topology complete "${extra[@]}")
		[ -n "$boot" ] && args+=(--bootstrap "$boot")
		"$BIN" "${args[@]}" >"$dir/n$i.log" 2>&1 &
		pids+=($!)
		[ -z "$boot" ] && boot=$listen/p2p/$id
	done
	trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
	apis=()
	for i in $(seq 0 $((N - 1))); do apis+=("127.0.0.1:${ports[$((2 * i + 1))]}"); done
	deadline=$((SECONDS + 600))
	while :; do
		done_=1
		for a in "${apis[@]}"; do
			r=$(status "$a" 2>/dev/null | /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["round"])' 2>/dev/null || echo 0)
			[ "$r" -ge "$ROUNDS" ] || done_=0
		done
		[ $done_ = 1 ] && break
		[ $SECONDS -lt $deadline ] || { echo "$mode: members did not reach $ROUNDS rounds in 600 s" >&2; exit 1; }
		sleep 0.5
	done
	for a in "${apis[@]}"; do status "$a" | /usr/bin/python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)))'; done | /usr/bin/python3 -c '
import json, sys
ss = [json.loads(l) for l in sys.stdin if l.strip()]
acc = sum(s["accuracy"] for s in ss) / len(ss)
rounds = sum(s["round"] for s in ss) / len(ss)
bytes_ = sum(s["bytes_out"] for s in ss) / len(ss)
msgs = sum(s["messages_out"] for s in ss) / len(ss)
up = sum(s["uptime_seconds"] for s in ss) / len(ss)
sec = ss[0].get("secure")
lo = min(s["accuracy"] for s in ss)
print(f"'"$mode"': accuracy {acc:.4f} (min {lo:.4f}) after {rounds:.0f} rounds; per member and round: {bytes_/rounds:,.0f} bytes, {msgs/rounds:.1f} messages out; {1000*up/rounds:.0f} ms a round" + (f"; secure rounds {sec}" if sec else ""))'
	kill "${pids[@]}" 2>/dev/null || true
	wait 2>/dev/null || true
	trap - EXIT
	rm -rf "$dir"
done
