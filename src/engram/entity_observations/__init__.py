"""Entity observations (entities.md): a summary of each frequently mentioned entity, regenerated in
the background from its most recent facts."""
