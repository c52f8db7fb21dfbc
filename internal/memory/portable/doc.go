// Package portable is the export and import format of a tenant's memory
// (docs/export.md): JSON Lines, a header, one record a line for every row
// an owner or a tenant holds, and a trailer with counts and a checksum.
// Export streams it in keyset pages under one read-only snapshot; import
// validates every line first, then writes each owner in one transaction,
// keeping ids and timestamps, skipping what already exists (idempotent).
package portable
