#!/bin/bash
# Stop time of the daemons (docs/OPERATIONS.md "Stop and restart"): each
# daemon stopped 3 times by SIGTERM and by SIGKILL, with a live two-path
# connection carrying 100 pings/s, in two namespaces. Prints how long until
# the process exited and until its TUN was gone. Needs root.
# Run from the checkout after `cargo build --release -p mpdccp`.
B=${MPDCCP:-target/release/mpdccp}
D=$(mktemp -d)
ip netns del mpdg 2>/dev/null; ip netns del mpdc 2>/dev/null
ip netns add mpdg; ip netns add mpdc
for n in mpdg mpdc; do ip -n $n link set lo up; done
ip link add e1 netns mpdc type veth peer name g1 netns mpdg
ip link add e2 netns mpdc type veth peer name g2 netns mpdg
ip -n mpdg addr add 192.0.2.1/24 dev g1; ip -n mpdg addr add 198.51.100.1/24 dev g2
ip -n mpdc addr add 192.0.2.2/24 dev e1; ip -n mpdc addr add 198.51.100.2/24 dev e2
for l in g1 g2; do ip -n mpdg link set $l up; done; for l in e1 e2; do ip -n mpdc link set $l up; done
ip -n mpdc route add 192.0.2.1/32 via 198.51.100.1 dev e2 metric 100
cat > $D/g.toml <<EOT
listen = "0.0.0.0:6511"
auth = "open"
[tun]
name = "mpdg0"
addresses = ["10.99.0.1/16", "fd99::1/48"]
[ops]
control_socket = "$D/g.sock"
EOT
cat > $D/c.toml <<EOT
server = "192.0.2.1:6511"
[[path]]
name = "dsl"
interface = "e1"
[[path]]
name = "lte"
interface = "e2"
[tun]
name = "mpdc0"
addresses = ["10.99.1.2/16", "fd99:0:1::2/48"]
routes = ["10.98.0.0/16"]
[ops]
control_socket = "$D/c.sock"
EOT
up() { for k in $(seq 200); do $B status --socket $1 --json 2>/dev/null | grep -q '"established": true' && return 0; sleep 0.05; done; return 1; }
ms() { echo "($2-$1)*1000" | bc | cut -d. -f1; }
for who in client server; do for sig in TERM KILL; do for i in 1 2 3; do
  rm -f $D/g.sock $D/c.sock
  ip netns exec mpdg $B server --config $D/g.toml 2>$D/g.log & G=$!
  sleep 0.3
  ip netns exec mpdc $B client --config $D/c.toml 2>$D/c.log & C=$!
  up $D/c.sock || { echo "not up"; cat $D/c.log; }
  ip netns exec mpdc ping -q -i 0.01 -c 300 10.99.0.1 >/dev/null 2>&1 & PP=$!
  sleep 1
  if [ $who = client ]; then P=$C; NS=mpdc; T=mpdc0; else P=$G; NS=mpdg; T=mpdg0; fi
  t0=$(date +%s.%N); kill -$sig $P; wait $P 2>/dev/null; t1=$(date +%s.%N)
  while ip -n $NS link show $T >/dev/null 2>&1; do sleep 0.005; done; t2=$(date +%s.%N)
  echo "$who $sig: exit $(ms $t0 $t1) ms, TUN gone $(ms $t0 $t2) ms"
  kill $PP 2>/dev/null; kill -TERM $C $G 2>/dev/null; wait $C $G 2>/dev/null
done; done; done
uptime
ip netns del mpdg; ip netns del mpdc
rm -rf "$D"
