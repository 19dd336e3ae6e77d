#!/bin/bash
# The speed figures of docs/benchmarks.md ("Speed: lean apply path and kernel-bypass receive"),
# an old build beside this one in one sitting (root: namespaces and XDP):
#   git worktree add /tmp/old OLD_COMMIT && (cd /tmp/old && cargo build --release -p dta \
#     && cargo bench -p dta-translator --bench suite --no-run \
#     && cargo bench -p dta-xdp --bench netns --no-run)
#   (the same three here), then: scripts/speed_ab.sh /tmp/old > speed.log
set -u
OLD=${1:?usage: scripts/speed_ab.sh OLD_CHECKOUT}; NEW=$(cd "$(dirname "$0")/.." && pwd)
OSUITE=$(ls -t $OLD/target/release/deps/suite-* | grep -v '\.d$' | head -1)
NSUITE=$(ls -t $NEW/target/release/deps/suite-* | grep -v '\.d$' | head -1)
ONETNS=$(ls -t $OLD/target/release/deps/netns-* | grep -v '\.d$' | head -1)
NNETNS=$(ls -t $NEW/target/release/deps/netns-* | grep -v '\.d$' | head -1)
echo "== $(date -u) $(uname -r) $(nproc) cores; old $OSUITE new $NSUITE"
for which in old new; do
    S=$OSUITE; [ $which = new ] && S=$NSUITE
    echo "== suite $which; uptime: $(uptime)"
    $S --only apply,cuckoo,e2e --prims kw,ki --runs 5 --cpu-time 2>&1
    echo "== after: $(uptime)"
done
for which in old new; do
  S=$OSUITE; [ $which = new ] && S=$NSUITE
  echo "== refs $which"
  $S --only refs --prims kw,ki 2>&1 | grep -E "Key-Write|Key-Increment|baseline|refs"
done
for which in old new; do
  N=$ONETNS; [ $which = new ] && N=$NNETNS
  echo "== netns $which; uptime: $(uptime)"
  $N --secs 3 --runs 5 2>&1
  echo "== after: $(uptime)"
done
echo "== e2e_ab loopback; uptime: $(uptime)"
cd $NEW && python3 scripts/e2e_ab.py --bin before=$OLD/target/release/dta --bin after=$NEW/target/release/dta --runs 5 --count 4000000 2>&1
echo "== int_e2e; uptime: $(uptime)"
cd $NEW && python3 scripts/int_e2e.py --netns --runs 5 --rates max,100000 \
  --bin before=$OLD/target/release/dta --bin before_xdp=$OLD/target/release/dta \
  --bin after=$NEW/target/release/dta --bin after_xdp=$NEW/target/release/dta \
  --bin after_af_xdp=$NEW/target/release/dta \
  --xdp before_xdp --xdp after_xdp --af-xdp after_af_xdp --floor 2>&1
echo "== end $(date -u); uptime: $(uptime)"
