#pragma once
// stub: BertForSequenceClassification (being written)
