"""Entity mention counts as stored, and as a recount from the mentions gives them: tests compare the
two after deletes and concurrent writes."""

MENTIONS_STORED = "SELECT canonical_name, mention_count FROM entities WHERE bank_id = $1"
MENTIONS_RECOUNTED = """
    SELECT e.canonical_name, count(*) FROM unit_entities ue JOIN entities e ON e.id = ue.entity_id
    WHERE e.bank_id = $1 GROUP BY 1
"""
