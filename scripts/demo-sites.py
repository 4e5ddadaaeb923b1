#!/usr/bin/env python3
"""Sites for the demo's few-shot task: N random positions of a genome, as a BED of TSS.

Usage: demo-sites.py GENOME.fa OUT.bed [N] [SEED]   (N = 2000, SEED = 7)

The built-in chr22 has no promoter annotation, so the demo's task is "real chr22 sequence
vs DeePromoter-style negatives" (genemask dataset promoter keeps 8 of 20 parts of each
window and replaces the others with random bases). This script picks N positions, uniformly
and reproducibly, whose +-60 bp lie in unmasked (upper-case) A/C/G/T sequence, each on a
random strand, and writes them as 1-bp BED6 intervals (0-based; the 5' end is the "TSS").
For a real promoter task use EPDnew's TSS BED instead (docs/datasets.md).
"""
import random
import sys

from whole_file import refuse_input, whole_file

FLANK = 60
OK = frozenset(b"ACGT")


def read_fasta(path):
    name, parts = None, []
    with open(path, "rb") as f:
        for line in f:
            if line.startswith(b">"):
                if name is not None:
                    yield name, b"".join(parts)
                name, parts = line[1:].split()[0].decode(), []
            else:
                parts.append(line.strip())
    if name is not None:
        yield name, b"".join(parts)


def main(argv):
    if len(argv) not in (3, 4, 5):
        sys.exit(__doc__.split("\n\n")[1])
    genome, out = argv[1], argv[2]
    refuse_input(out, genome, "demo-sites")
    n = int(argv[3]) if len(argv) > 3 else 2000
    rng = random.Random(int(argv[4]) if len(argv) > 4 else 7)
    records = [(name, seq) for name, seq in read_fasta(genome) if len(seq) > 2 * FLANK + 1]
    if not records:
        sys.exit(f"demo-sites: {genome}: no sequence longer than {2 * FLANK + 1} bp")
    total = sum(len(s) for _, s in records)
    sites, tries = set(), 0
    while len(sites) < n:
        tries += 1
        if tries > 1000 * n:
            sys.exit(f"demo-sites: {genome}: found only {len(sites)} unmasked sites in {tries} tries")
        x = rng.randrange(total)
        for i, (name, seq) in enumerate(records):
            if x < len(seq):
                break
            x -= len(seq)
        if x < FLANK or x + FLANK >= len(seq) or not OK.issuperset(seq[x - FLANK:x + FLANK + 1]):
            continue
        sites.add((i, x, rng.choice("+-")))
    # A temporary of its own beside OUT, renamed once whole: two runs never share one.
    with whole_file(out, src=genome, who="demo-sites") as f:
        for k, (i, x, strand) in enumerate(sorted(sites)):
            f.write(f"{records[i][0]}\t{x}\t{x + 1}\tsite{k + 1}\t0\t{strand}\n")
    print(f"demo-sites: {len(sites)} sites in {out}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv)
