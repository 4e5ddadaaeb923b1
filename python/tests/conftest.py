"""Fixtures of the Python package's tests: a small genome, and the CLI's outputs on it
(counts.h5, npmi.tsv, pmi_vocab.tsv, shards, first masked batches, an exported model),
made once per session by the `genemask` binary (GENEMASK_BIN, default build/src/cli/genemask)."""
import json
import os
import random
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.abspath(os.environ.get("GENEMASK_BIN", os.path.join(ROOT, "build", "src", "cli", "genemask")))
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
SEED = 7
TINY = {"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 1,
        "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512,
        "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}


def cli(*args):
    """Runs the genemask CLI; returns its summary (the last stdout line, JSON)."""
    if not os.access(BIN, os.X_OK):
        raise AssertionError(f"the genemask binary is not at {BIN}: build it (scripts/build.sh) or set GENEMASK_BIN")
    p = subprocess.run([BIN, *map(str, args)], env=ENV, capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"genemask {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stderr}")
    lines = p.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def write_genome(path, rng, records=2, length=(20000, 30000)):
    """Records with lower case, N gaps and an IUPAC code or two; returns the upper-cased sequences."""
    seqs = {}
    with open(path, "w") as f:
        for r in range(records):
            n = rng.randint(*length)
            s = list(rng.choices("ACGTacgt", weights=[3, 2, 2, 3, 1, 1, 1, 1], k=n))
            for _ in range(3):
                p = rng.randrange(n - 100)
                g = rng.choice([1, 40])
                s[p:p + g] = "N" * g
            s[rng.randrange(n)] = "R"
            s = "".join(s)
            name = f"chr{r + 1}"
            seqs[name] = s.upper()
            f.write(f">{name} test record\n" + "".join(s[i:i + 60] + "\n" for i in range(0, n, 60)))
    return seqs


@pytest.fixture(scope="session")
def work(tmp_path_factory):
    """The CLI's outputs on one small genome."""
    d = tmp_path_factory.mktemp("cli")
    fa = str(d / "g.fa")
    seqs = write_genome(fa, random.Random(11))
    w = {"dir": d, "fasta": fa, "seqs": seqs, "counts": str(d / "counts.h5"), "npmi": str(d / "npmi.tsv"),
         "pmi_vocab": str(d / "pmi_vocab.tsv"), "shards": str(d / "shards"), "kmax": 8}
    cli("count", "--genome", fa, "--out", w["counts"], "--kmax", w["kmax"])
    cli("npmi", "--counts", w["counts"], "--out", w["npmi"], "--k", 6, "--min-count", 3)
    cli("pmi-vocab", "--counts", w["counts"], "--out", w["pmi_vocab"], "--min-count", 3, "--size", 300, "--kmax", 8)
    cli("shards", "--genome", fa, "--out", w["shards"], "--max-tokens", 120, "--min-tokens", 20)
    with open(d / "tiny.json", "w") as f:
        json.dump(TINY, f)
    w["model"] = str(d / "tiny.json")
    return w


@pytest.fixture(scope="session")
def first_batches(work):
    """{strategy: (run directory, first-batch.safetensors)} of a 1-step `genemask pretrain`."""
    out = {}
    for strategy in ("genemask", "random", "pmi-vocab"):
        run = str(work["dir"] / f"run-{strategy}")
        dump = str(work["dir"] / f"first-{strategy}.safetensors")
        tables = {"genemask": ["--npmi", work["npmi"]], "pmi-vocab": ["--pmi-vocab", work["pmi_vocab"]]}
        cli("pretrain", "--shards", work["shards"], "--model", work["model"], "--out", run, "--masking", strategy,
            *tables.get(strategy, []), "--steps", 1, "--warmup", 1,
            "--batch-per-rank", 16, "--grad-accum", 1, "--eval-every", 0, "--threads", 1, "--seed", SEED,
            "--dump-first-batch", dump)
        out[strategy] = (run, dump)
    return out
