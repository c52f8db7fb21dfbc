package memory

// A write that changes one memory writes its history row in the same
// statement with INSERT ... VALUES, from values the write already holds
// (the row it locked and read, its parameters), never with an
// INSERT ... SELECT from the changed row (the UPDATE's RETURNING).
//
// On Citus the history table's identity column makes every INSERT ... SELECT
// into it run on the coordinator: the coordinator reads the rows from the
// worker and copies them back, so each such write was a two-phase commit
// (PREPARE TRANSACTION) where one plain commit on the transaction's one
// connection to the tenant's worker suffices; a VALUES row is sent with the
// statement. On plain PostgreSQL both forms write the same row in one
// statement. The row is locked and read earlier in the same transaction
// (lockNeighbour, load ... FOR UPDATE), so it is the row the update changes
// and the values read are its values (issue 30; TestCitusHistoryWritesStayOnTheWorker).
//
// The eviction over the per-owner cap reads and locks its victims first,
// then deletes them and writes their history rows as VALUES (evictvictims.go).
// The jobs (decay, expire, compact) change many rows a statement and still
// log them with INSERT ... SELECT: on Citus one two-phase commit per batch
// of up to the job's batch size, not per memory.
