package write

import "encoding/json"

// Metadata and tags on the write path: parameters of the statements
// (never text of them) and the history's record of what a write set.

// MetadataParam is a jsonb parameter of metadata: NULL when there is none
// (an insert then stores {}, a rewrite keeps the row's).
func MetadataParam(m json.RawMessage) any {
	if len(m) == 0 {
		return nil
	}
	return string(m)
}

// TagsParam is a text[] parameter of tags: NULL when nil (an insert then
// stores {}, a rewrite keeps the row's); an empty list is a list.
func TagsParam(t []string) any {
	if t == nil {
		return nil
	}
	return t
}

// labelDetails records in a history row's details the metadata and tags a
// write set, when it set any.
func labelDetails(details map[string]any, p *Prepared) map[string]any {
	if len(p.Req.Metadata) > 0 {
		details["metadata"] = p.Req.Metadata
	}
	if p.Req.Tags != nil {
		details["tags"] = p.Req.Tags
	}
	return details
}
