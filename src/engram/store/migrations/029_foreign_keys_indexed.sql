-- Every foreign key gets an index that leads with its columns. PostgreSQL acts on a referenced row's
-- deletion with one query per row against the referencing table; without such an index each query
-- reads that whole table. Deleting a document's chunks set memory_units.chunk_id to NULL by scanning
-- every fact of every bank once per chunk: clearing a 100,000-memory bank spent ~1,100 s there and hit
-- the statement timeout, and deleting one document at that size took 100-300 ms. The facts' index is
-- partial: facts without a chunk (observations, facts given directly) are never looked up by it.
CREATE INDEX memory_units_chunk ON memory_units (chunk_id) WHERE chunk_id IS NOT NULL;
CREATE INDEX attachments_chunk ON attachments (chunk_id) WHERE chunk_id IS NOT NULL;
CREATE INDEX kb_nodes_parent ON kb_nodes (parent_id) WHERE parent_id IS NOT NULL;
