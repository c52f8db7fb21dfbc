package core

import (
	"encoding/json"
	"errors"
	"strings"
)

// DecodeJSONAnswer parses a model's JSON answer, tolerating code fences and
// text around the object.
func DecodeJSONAnswer(answer string, out any) error {
	start, end := strings.Index(answer, "{"), strings.LastIndex(answer, "}")
	if start < 0 || end < start {
		return errors.New("no JSON object in the answer")
	}
	return json.Unmarshal([]byte(answer[start:end+1]), out)
}
