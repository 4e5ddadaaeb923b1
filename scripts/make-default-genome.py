#!/usr/bin/env python3
"""Lays the human (Hsap.22) rows of a MAF alignment at their chromosome coordinates.

Reads the gzip MAF at path argv[1], writes FASTA to argv[2] (60 bases a line):
one record 'chr22' of the source length, N between the aligned blocks, the blocks'
bases as given (soft-masked lowercase kept), alignment gaps ('-') removed.
"""
import gzip
import sys

from whole_file import refuse_input, whole_file


def main(maf_path: str, out_path: str, species: str = "Hsap.22", name: str = "chr22") -> None:
    refuse_input(out_path, maf_path, "make-default-genome")
    blocks = []
    src_len = None
    with gzip.open(maf_path, "rt") as f:
        for line in f:
            if not line.startswith("s "):
                continue
            parts = line.split()
            if parts[1] != species:
                continue
            start, size, strand, total, text = int(parts[2]), int(parts[3]), parts[4], int(parts[5]), parts[6]
            if strand != "+":
                raise SystemExit(f"{maf_path}: unexpected strand {strand} for {species}")
            seq = text.replace("-", "")
            if len(seq) != size:
                raise SystemExit(f"{maf_path}: block at {start}: {len(seq)} bases, header says {size}")
            src_len = total
            blocks.append((start, seq))
    if not blocks:
        raise SystemExit(f"{maf_path}: no rows for {species}")
    blocks.sort()
    # A temporary of its own beside out_path, renamed once whole: two runs never share one.
    with whole_file(out_path, src=maf_path, who="make-default-genome") as f:
        write_fasta(f, blocks, src_len, name, maf_path)
    real = sum(len(s) for _, s in blocks)
    print(f"wrote {out_path}: {name}, {src_len} bases, {len(blocks)} blocks, {real} aligned bases", file=sys.stderr)


def write_fasta(out, blocks, src_len: int, name: str, maf_path: str) -> None:
    with out:
        out.write(f">{name} human chromosome 22 (hg19), aligned blocks from maffilter-examples; N elsewhere\n")
        line = []
        pending = 0  # bases in `line`

        def emit(s: str) -> None:
            nonlocal pending
            i = 0
            while i < len(s):
                take = min(60 - pending, len(s) - i)
                line.append(s[i:i + take])
                pending += take
                i += take
                if pending == 60:
                    out.write("".join(line) + "\n")
                    line.clear()
                    pending = 0

        pos = 0
        for start, seq in blocks:
            if start < pos:
                raise SystemExit(f"{maf_path}: overlapping blocks at {start}")
            emit("N" * (start - pos))
            emit(seq)
            pos = start + len(seq)
        emit("N" * (src_len - pos))
        if pending:
            out.write("".join(line) + "\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
