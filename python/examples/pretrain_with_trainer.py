import sys
import genemask
from genemask.hf import DataCollatorForGeneMask
from transformers import BertConfig, BertForMaskedLM, Trainer, TrainingArguments

genome, sequences, out, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
counts = genemask.count_kmers(genome, kmax=6)  # exact k-mer counts, as `genemask count`
npmi = genemask.npmi(counts, k=6)              # the GRANK list, as `genemask npmi`
tok = genemask.Tokenizer()                     # DNABERT-6 ids
with open(sequences) as f:                     # one DNA sequence per line, up to 515 bases
    train = [{"input_ids": tok.encode(line.strip())} for line in f if line.strip()]
config = BertConfig(vocab_size=genemask.VOCAB_SIZE, hidden_size=128, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=512, pad_token_id=genemask.PAD)
args = TrainingArguments(out, max_steps=steps, per_device_train_batch_size=16, learning_rate=1e-3,
                         dataloader_num_workers=2, remove_unused_columns=False, report_to="none",
                         save_strategy="no", seed=42)
trainer = Trainer(model=BertForMaskedLM(config), args=args, train_dataset=train,
                  data_collator=DataCollatorForGeneMask(tok, npmi=npmi))  # GeneMask masking
trainer.train()
trainer.save_model(out)
