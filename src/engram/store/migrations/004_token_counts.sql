-- Token counts computed once at write time, so recall fills its budget without tokenising.
ALTER TABLE memory_units ADD COLUMN token_count integer;
