//! Sonata ([DTA Table 2]: query results by Key-Write under the query id, raw tuples by Append).
