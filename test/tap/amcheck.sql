-- contrib amcheck over the ledger and the journal, as the crash, failover
-- and replication tests run it on the server that survived: the heap of
-- both (verify_heapam) and every B-tree of both with all of the heap's
-- tuples looked up in it (bt_index_parent_check, heapallindexed), which
-- raises an error on any corruption.  One line: the heap problems found.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS amcheck;
SELECT count(bt_index_parent_check(i.indexrelid, heapallindexed => true)) >= 0 AS indexes_checked
FROM pg_index AS i
JOIN pg_class AS c ON c.oid = i.indexrelid
JOIN pg_am AS am ON am.oid = c.relam
WHERE i.indrelid IN ('pay_ledger'::regclass, 'pay_journal'::regclass) AND am.amname = 'btree' \gset
SELECT (SELECT count(*) FROM verify_heapam('pay_ledger')) +
       (SELECT count(*) FROM verify_heapam('pay_journal')) AS heap_problems;
