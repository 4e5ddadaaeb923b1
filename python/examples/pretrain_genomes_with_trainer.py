import sys
import genemask
from genemask.hf import DataCollatorForGeneMask
from transformers import BertConfig, BertForMaskedLM, Trainer, TrainingArguments

shards, npmi, out, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# `genemask shards --genomes genomes.tsv`: every genome's samples, each labelled with its genome,
# drawn as `pretrain --genome-weights temperature:3 --seed 42` draws them
train = genemask.ShardDataset(shards, genome_weights="temperature:3", seed=42, epochs=None, batch_size=16)
config = BertConfig(vocab_size=genemask.VOCAB_SIZE, hidden_size=128, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=512, pad_token_id=genemask.PAD)
args = TrainingArguments(out, max_steps=steps, per_device_train_batch_size=16, learning_rate=1e-3,
                         dataloader_num_workers=2, remove_unused_columns=False, report_to="none",
                         save_strategy="no", seed=42)
tok = genemask.Tokenizer()  # saved with the model: AutoTokenizer.from_pretrained(out) reads it
trainer = Trainer(model=BertForMaskedLM(config), args=args, train_dataset=train,  # GeneMask masking,
                  data_collator=DataCollatorForGeneMask(tok, npmi=npmi, seed=42))  # pretrain's masks
trainer.train()
trainer.save_model(out)
