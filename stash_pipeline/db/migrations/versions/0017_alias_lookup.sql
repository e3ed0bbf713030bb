-- Recall over every namespace looks up the aliases its phrases name by their normalised
-- form alone (the entity leg's all-namespaces branch). The only index that holds it,
-- UNIQUE (namespace_id, normalised), leads with the namespace, so that lookup read the
-- whole index: about 17 ms at 60,000 aliases, growing with the store. This index answers
-- it in a few probes; a scoped recall keeps using the (namespace_id, normalised) one.
CREATE INDEX entity_aliases_normalised_idx ON entity_aliases (normalised);
