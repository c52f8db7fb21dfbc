package core

import (
	"github.com/jackc/pgx/v5"
)

// Pages of lists (memories, a memory's history, the changelog, sessions,
// owners, the global memories) are bounded like the conversation answers
// (memory's answercap.go): by their row limit and by the runtime's byte cap, the
// rows scanned one at a time and the scan stopped where the page is full.
// A page the cap ended early says so (Truncated) and its NextCursor reads
// on from its last item, exactly as after a full page.
//
// The first item of a page is always given, whatever its size, so a client
// that follows the cursor always makes progress: a page is within the cap,
// or it is that one item, whose size the policy bounds (a memory's content
// by limits.maxContentBytes, a changelog entry by two documents of 8 KiB);
// JSON escapes a byte to at most 6, so keep the cap at least 6 × the
// largest item plus a few KiB (the default 1 MiB holds any item of the
// default policy, and any changelog entry).

// PageBounds is what a list page says about its end.
type PageBounds struct {
	// NextCursor reads the next page; empty on the last page.
	NextCursor string `json:"nextCursor,omitempty"`
	// Truncated: the byte cap ended the page before its limit (NextCursor
	// reads on from its last item).
	Truncated bool `json:"truncated"`
}

// PageScan is the outcome of scanning a page's rows.
type PageScan[T any] struct {
	Items []T
	// More: rows were left after the page (a next page exists).
	More bool
	// Cut: the byte cap ended the page.
	Cut bool
}

// ScanPage reads rows (queried with LIMIT limit+1) into a page of at most
// limit items whose JSON fits b; the first item is always taken. The rows
// after the page are discarded unread.
func ScanPage[T any](rows pgx.Rows, limit int, b *AnswerBytes, scan func(pgx.Rows) (T, error)) (PageScan[T], error) {
	defer rows.Close()
	p := PageScan[T]{Items: []T{}}
	for rows.Next() {
		if len(p.Items) == limit {
			p.More = true
			break
		}
		item, err := scan(rows)
		if err != nil {
			return p, err
		}
		fits := b.Take(item)
		if !fits && len(p.Items) > 0 {
			p.More, p.Cut = true, true
			break
		}
		p.Items = append(p.Items, item)
		if !fits { // the first item alone passes the cap: the page is that item
			p.More, p.Cut = rows.Next(), true
			break
		}
	}
	rows.Close()
	return p, rows.Err()
}

// Bounds is the end of the page: the cursor of its last item when more
// rows follow.
func (p *PageScan[T]) Bounds(cursor func(T) string) PageBounds {
	if !p.More || len(p.Items) == 0 {
		return PageBounds{}
	}
	return PageBounds{NextCursor: cursor(p.Items[len(p.Items)-1]), Truncated: p.Cut}
}

// FitRanked keeps the leading items of a ranked answer (search results,
// best first) while their JSON fits b, and returns how many it kept: the
// rest are the lowest ranked, which the answer counts as omitted. Unlike a
// page, a ranked answer has no cursor to read on, so an item larger than
// the whole answer may hold is left out like the rest.
func FitRanked[T any](b *AnswerBytes, items []T) int {
	for i := range items {
		if !b.Take(items[i]) {
			return i
		}
	}
	return len(items)
}
