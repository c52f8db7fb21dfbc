package core

import "context"

// OwnerRows is one table of a part whose rows of an owner an erase
// deletes: what they are called, and where their count goes.
type OwnerRows struct {
	Table, What string
	Count       *int64
}

// EraseOwnerRows deletes the owner's rows of each table in tx, in order,
// counting each: a part's share of the façade's EraseOwner, which erases
// every part of the owner in one transaction.
func EraseOwnerRows(ctx context.Context, tx DBTX, owner string, tables ...OwnerRows) error {
	for _, t := range tables {
		tag, err := tx.Exec(ctx, `DELETE FROM `+t.Table+` WHERE owner_id = $1`, owner)
		if err != nil {
			return DBErr("erasing "+t.What, err)
		}
		*t.Count = tag.RowsAffected()
	}
	return nil
}
