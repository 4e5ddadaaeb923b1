#!/usr/bin/env bash
# Tiny inputs for the pipeline tests (sourced): tiny_pipeline_inputs DIR PYTHON writes
# DIR/genome.fa (a random 2-chromosome genome, ~300 kb), DIR/tss.bed (160 random TSS),
# DIR/genes.gtf (30 random 3-exon transcripts), DIR/enhancers/ (genomic-benchmarks layout:
# train|test/positive|negative.csv, 200 bp intervals; 30 and 15 per class),
# DIR/tiny.json (a 1-layer BERT) and DIR/pipeline.conf (4 pretraining steps per masking
# strategy, a promoter task with 5 and 10 shots, 2 seeds).
tiny_pipeline_inputs() {
  local tmp=$1 py=$2
"$py" - "$tmp" <<'PYEOF'
import json, os, random, sys
tmp = sys.argv[1]
rng = random.Random(11)
lengths = [160000, 140000]
with open(os.path.join(tmp, "genome.fa"), "w") as f:
    for i, n in enumerate(lengths):
        s = "".join(rng.choices("ACGT", k=n))
        f.write(f">chr{i + 1}\n" + "".join(s[j:j + 70] + "\n" for j in range(0, n, 70)))
with open(os.path.join(tmp, "tss.bed"), "w") as f:
    for k in range(160):
        c = rng.randrange(len(lengths))
        p = rng.randrange(500, lengths[c] - 500)
        f.write(f"chr{c + 1}\t{p}\t{p + 1}\tP{k}\t0\t{rng.choice('+-')}\n")
with open(os.path.join(tmp, "genes.gtf"), "w") as f:
    for t in range(30):
        c = rng.randrange(len(lengths))
        strand = rng.choice("+-")
        pos = rng.randrange(1000, lengths[c] - 5000)
        for e in range(3):
            n = rng.randrange(100, 200)
            f.write(f"chr{c + 1}\ttest\texon\t{pos + 1}\t{pos + n}\t.\t{strand}\t.\t"
                    f"gene_id \"G{t}\"; transcript_id \"T{t}\"; exon_number \"{e + 1}\";\n")
            pos += n + rng.randrange(300, 800)
for part, n in (("train", 30), ("test", 15)):
    os.makedirs(os.path.join(tmp, "enhancers", part), exist_ok=True)
    for cls in ("positive", "negative"):
        with open(os.path.join(tmp, "enhancers", part, cls + ".csv"), "w") as f:
            f.write("id,region,start,end,strand\n")
            for k in range(n):
                c = rng.randrange(len(lengths))
                p = rng.randrange(0, lengths[c] - 200)
                f.write(f"{part}_{cls}_{k},chr{c + 1},{p},{p + 200},{rng.choice('+-')}\n")
with open(os.path.join(tmp, "tiny.json"), "w") as f:
    json.dump({"model_type": "bert", "vocab_size": 4101, "hidden_size": 32, "num_hidden_layers": 1,
               "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 512,
               "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1}, f)
PYEOF

cat >"$tmp/pipeline.conf" <<'CONF'
# shellcheck disable=SC2034
GENOME=genome.fa
TSS=tss.bed
OUT=out
MODEL=tiny.json
MODEL_LABEL=tiny
MASKINGS="genemask random"
STEPS=4
WARMUP=1
BATCH_PER_RANK=2
GRAD_ACCUM=1
CHECKPOINT_EVERY=2
EVAL_EVERY=0
RANKS_COUNT=2
RANKS_SHARDS=2
RANKS_PRETRAIN=1
RANKS_SWEEP=2
SHOTS="5 10"
SEEDS=2
FINETUNE_JSON='{"epochs": 2}'
COUNT_OPTS="--kmax 8 --quiet"
NPMI_OPTS="--min-count 2"
PMI_VOCAB_OPTS="--min-count 10 --size 500 --kmax 8"
SHARDS_OPTS="--max-tokens 60 --min-tokens 20"
PRETRAIN_OPTS="--threads 1 --log-every 1"
REPORT_OPTS="--no-png"
CONF
}
