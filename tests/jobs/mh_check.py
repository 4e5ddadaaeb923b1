#!/usr/bin/env python3
"""Checks of the multi-host test (tests/jobs/test_multihost.sh), one subcommand each.

  curves A B TOL           metrics.jsonl of two pretrain runs: the same steps, losses within
                           a relative TOL
  weights A B TOL          two model.safetensors: the same tensors, max |a - b| <= TOL
  checkpoints RUN          every checkpoint's state.json lists files whose SHA-256 matches
  records A B              two results.jsonl: the same jobs with the same metrics, each once
  layout SUMMARY N PPN     a pretrain summary line: N ranks, PPN per host in rank order,
                           node-local ranks 0..PPN-1 on each host
  summary LOG KEY VALUE    the last summary line in LOG has KEY == VALUE (an int)
"""
import hashlib
import json
import os
import struct
import sys


def fail(msg):
    print(f"mh_check: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def losses(path):
    out = {}
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            if "loss" in r and "step" in r:
                out[r["step"]] = r["loss"]
    return out


def curves(a, b, tol):
    la, lb = losses(a), losses(b)
    if sorted(la) != sorted(lb):
        fail(f"steps differ: {sorted(la)} vs {sorted(lb)}")
    worst = max(abs(la[s] - lb[s]) / max(abs(lb[s]), 1e-12) for s in la)
    if worst > float(tol):
        fail(f"loss curves differ by {worst:.3g} (relative) > {tol}: {la} vs {lb}")
    print(f"curves: {len(la)} steps, largest relative difference {worst:.3g} (tolerance {tol})")


def tensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        if t["dtype"] != "F32":
            fail(f"{path}: {name} is {t['dtype']}, expected F32")
        lo, hi = t["data_offsets"]
        out[name] = struct.unpack(f"<{(hi - lo) // 4}f", data[lo:hi])
    return out


def weights(a, b, tol):
    ta, tb = tensors(a), tensors(b)
    if sorted(ta) != sorted(tb):
        fail("tensor names differ")
    worst = max(max((abs(x - y) for x, y in zip(ta[k], tb[k])), default=0.0) for k in ta)
    if worst > float(tol):
        fail(f"weights differ by {worst:.3g} > {tol}")
    print(f"weights: {len(ta)} tensors, largest difference {worst:.3g} (tolerance {tol})")


def checkpoints(run):
    d = os.path.join(run, "checkpoints")
    names = sorted(n for n in os.listdir(d) if n.startswith("step-") and not n.endswith(".tmp"))
    if not names:
        fail(f"{d}: no checkpoint")
    for n in names:
        st = json.load(open(os.path.join(d, n, "state.json")))
        for f, digest in st["files"].items():
            have = hashlib.sha256(open(os.path.join(d, n, f), "rb").read()).hexdigest()
            if have != digest:
                fail(f"{d}/{n}/{f}: SHA-256 {have[:12]} differs from state.json's {digest[:12]}")
    print(f"checkpoints: {', '.join(names)} intact")


# The fields of a sweep record that depend on where and when it ran, not on what it computed
# (sweep_id: the sweep directory's random id, another in each directory; record_sha256: the
# SHA-256 of all the others, these included).
VOLATILE = {"seconds", "host", "rank", "out", "sweep_id", "record_sha256"}


def records(path):
    out = {}
    for line in open(path):
        if not line.strip():
            continue
        r = json.loads(line)
        key = r["job"]
        if key in out:
            fail(f"{path}: job {key} recorded twice")
        out[key] = {k: v for k, v in r.items() if k not in VOLATILE}
    return out


def compare_records(a, b):
    ra, rb = records(a), records(b)
    if sorted(ra) != sorted(rb):
        fail(f"different jobs: only in {a}: {sorted(set(ra) - set(rb))}; only in {b}: {sorted(set(rb) - set(ra))}")
    for k in ra:
        if ra[k] != rb[k]:
            fail(f"job {k}: {ra[k]} vs {rb[k]}")
    print(f"records: {len(ra)} jobs, each once, the same in both")


def last_summary(path):
    found = None
    for line in open(path, errors="replace"):
        line = line.strip()
        if line.startswith("{") and '"command"' in line:
            found = json.loads(line)
    if found is None:
        fail(f"{path}: no summary line")
    return found


def layout(path, n, ppn):
    s = last_summary(path)
    lay = s["layout"]
    n, ppn = int(n), int(ppn)
    if len(lay) != n:
        fail(f"{path}: {len(lay)} ranks in the layout, expected {n}: {lay}")
    for r, p in enumerate(lay):
        host = f"node{r // ppn + 1}"
        if p["host"] != host or p["local_rank"] != r % ppn:
            fail(f"{path}: rank {r} ran on {p['host']} as local rank {p['local_rank']}, expected {host} "
                 f"local rank {r % ppn}: {lay}")
    print(f"layout: {n} ranks, {ppn} per host, node-local ranks as expected")


def summary(path, key, value):
    s = last_summary(path)
    if s.get(key) != int(value):
        fail(f"{path}: {key} = {s.get(key)}, expected {value}")
    print(f"summary: {key} = {value}")


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    {"curves": curves, "weights": weights, "checkpoints": checkpoints, "records": compare_records,
     "layout": layout, "summary": summary}[cmd](*args)
