-- A bank's sentence vectors through an index: the semantic arm's exact search reads a bank's
-- sentences by their own bank_id (engram.recall.arms.semantic_side), not through their facts. With
-- no index that would be a scan of every bank's sentences for each recall of a small bank.
CREATE INDEX memory_unit_sentences_bank ON memory_unit_sentences (bank_id);
