# stub: tests of finetune (being written)
