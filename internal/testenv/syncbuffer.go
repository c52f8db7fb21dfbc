package testenv

import (
	"bytes"
	"sync"
)

// SyncBuffer is a bytes.Buffer that a process's or a logger's writer
// goroutines may write while the test reads it: the suites read log lines
// of a service that is still running.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
