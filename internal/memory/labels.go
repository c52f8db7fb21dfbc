package memory

import "encoding/json"

// updateLabelDetails records in an update's history row the metadata and
// tags it changed, before and after, so the history tells what a memory
// was labelled with at any time ({} and [] for none).
func updateLabelDetails(cur Memory, req UpdateRequest) map[string]any {
	d := map[string]any{}
	if req.Metadata != nil {
		d["previousMetadata"], d["metadata"] = orEmptyObject(cur.Metadata), req.Metadata
	}
	if req.Tags != nil {
		d["previousTags"], d["tags"] = orEmptyList(cur.Tags), req.Tags
	}
	return d
}

func orEmptyObject(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return json.RawMessage("{}")
	}
	return m
}

func orEmptyList(t []string) []string {
	if t == nil {
		return []string{}
	}
	return t
}
