-- PostgreSQL text of 0004_plain_rowids.sql. SQLite's step drops
-- AUTOINCREMENT's counter row, which every commit rewrote; PostgreSQL's
-- identity sequences are not written by the transaction, so the audit
-- log keeps its identity column. The trail's ids change in 0005.
SELECT 1;
