package controller

import "strings"

// oneLine joins a multi-line error (errors.Join) for a condition message.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }
