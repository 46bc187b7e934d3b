-- Names are no longer unique per bank: the same name in an unrelated context is a separate entity
-- (retain/entities.py resolves under a per-name transaction lock instead). Labels stay unique: a
-- label is an identifier. entity_type (person, organisation, place, product, concept) is now written.
DROP INDEX IF EXISTS entities_bank_name;
CREATE INDEX entities_bank_name ON entities (bank_id, lower(canonical_name));
CREATE UNIQUE INDEX entities_bank_label ON entities (bank_id, lower(canonical_name)) WHERE entity_kind = 'label';
CREATE INDEX entities_bank_type ON entities (bank_id, entity_type) WHERE entity_type IS NOT NULL;
