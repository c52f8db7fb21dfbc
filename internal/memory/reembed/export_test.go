package reembed

// SetBetweenProgressReads makes ReadProgress run fn between its two reads
// until the returned func restores it.
func SetBetweenProgressReads(fn func()) (restore func()) {
	betweenProgressReads = fn
	return func() { betweenProgressReads = nil }
}
