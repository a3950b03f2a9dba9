# Copied from the team's shared/bench (the reference baseline the issue asks us to measure against).
"""Naive baseline: pure-Python max-min (progressive filling from scratch at every event), latency 0.

Usage: python naive_maxmin.py leafspine128_10k_c1000.json
Recomputes every flow's completion time, prints flows/s and the largest relative difference from
the SimGrid times stored in the file. A speed baseline, not a design to copy."""
import json, sys, time
from collections import defaultdict

d = json.load(open(sys.argv[1]))
cap, flows, routes, sg_done = d["cap"], d["flows"], d["routes"], d["done"]
assert d["lat"] == 0.0

def maxmin(active):
    cnt, rem = defaultdict(int), {}
    for f in active:
        for l in routes[f]:
            cnt[l] += 1
            rem[l] = cap[l]
    rate, unfixed = {}, set(active)
    while unfixed:
        share = min(rem[l] / c for l, c in cnt.items() if c > 0)
        sat = {l for l, c in cnt.items() if c > 0 and rem[l] / c <= share * (1 + 1e-12)}
        for f in [f for f in unfixed if any(l in sat for l in routes[f])]:
            rate[f] = share
            unfixed.discard(f)
            for l in routes[f]:
                cnt[l] -= 1
                rem[l] -= share
        for l in sat:
            cnt[l] = 0
    return rate

kids = defaultdict(list)
for i, f in enumerate(flows):
    if f[3] >= 0:
        kids[f[3]].append(i)
t0 = time.perf_counter()
t, left = 0.0, {}
for i, f in enumerate(flows):
    if f[3] < 0:
        left[i] = float(f[2])
done = [None] * len(flows)
while left:
    r = maxmin(list(left))
    dt = min(left[f] / r[f] for f in left)
    t += dt
    fin = [f for f in left if left[f] / r[f] <= dt * (1 + 1e-12)]
    for f in left:
        left[f] -= r[f] * dt
    for f in fin:
        del left[f]
        done[f] = t
        for k in kids[f]:
            left[k] = float(flows[k][2])
el = time.perf_counter() - t0
errs = [abs(a - b) / b for a, b in zip(sg_done, done)]
print(f"ref: {len(flows)} flows in {el:.2f}s ({len(flows)/el:.0f} flows/s); makespan ref={max(done):.9f} "
      f"sg={max(sg_done):.9f}; max rel.err={max(errs):.2e}; #>1e-6: {sum(e > 1e-6 for e in errs)}")
