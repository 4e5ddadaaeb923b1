"""The README's Python example is python/examples/pretrain_with_trainer.py, verbatim, and it
runs: a few Trainer steps on a small genome, the model saved."""
import os
import subprocess
import sys

from conftest import ROOT

EXAMPLE = os.path.join(ROOT, "python", "examples", "pretrain_with_trainer.py")


def test_the_readme_shows_the_example():
    with open(EXAMPLE) as f:
        code = f.read()
    with open(os.path.join(ROOT, "README.md")) as f:
        assert "```python\n" + code + "```" in f.read()


def test_the_example_trains_and_saves_a_model(work, tmp_path):
    seqs = tmp_path / "train.txt"
    chrom = work["seqs"]["chr1"]
    seqs.write_text("".join(chrom[i:i + 300] + "\n" for i in range(0, 300 * 40, 300) if "N" not in chrom[i:i + 300]))
    out = tmp_path / "model"
    p = subprocess.run([sys.executable, EXAMPLE, work["fasta"], str(seqs), str(out), "3"], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert (out / "config.json").exists() and (out / "model.safetensors").exists()
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    assert AutoModelForMaskedLM.from_pretrained(str(out)).config.vocab_size == 4101
    # Trainer saved genemask.Tokenizer as a BertTokenizer of the same ids
    import genemask
    s = chrom[:200].replace("N", "A").replace("R", "G")
    assert AutoTokenizer.from_pretrained(str(out))(" ".join(s[i:i + 6] for i in range(195)))["input_ids"] == \
        genemask.Tokenizer().encode(s).tolist()
