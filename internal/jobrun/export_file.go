package jobrun

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path"
	"path/filepath"
)

// fileSink writes an export to "."+name+".partial" in dir and renames it
// to name once complete and synced: a file under the final name is always
// a whole export; a crash leaves only a dot-file named partial.
type fileSink struct {
	dir, name, location string
	f                   *os.File
	buf                 *bufio.Writer
}

// fileBuffer is the write buffer of an export file.
const fileBuffer = 1 << 20

func openFile(dir, claim, subPath, name string) (*fileSink, error) {
	tmp := filepath.Join(dir, "."+name+".partial")
	// O_EXCL: two runs never write the same file.
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, fmt.Errorf("creating the export file in %s: %w", dir, err)
	}
	loc := "file://" + filepath.Join(dir, name)
	if claim != "" {
		loc = "pvc://" + claim + "/" + path.Join(subPath, name)
	}
	return &fileSink{dir: dir, name: name, location: loc, f: f, buf: bufio.NewWriterSize(f, fileBuffer)}, nil
}

func (s *fileSink) Write(p []byte) (int, error) { return s.buf.Write(p) }

// Commit flushes and syncs the file, renames it and syncs the directory,
// so the rename survives a crash of the node.
func (s *fileSink) Commit(context.Context) (string, error) {
	tmp := s.f.Name()
	if err := s.buf.Flush(); err != nil {
		return "", fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := s.f.Sync(); err != nil {
		return "", fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if err := s.f.Close(); err != nil {
		return "", fmt.Errorf("closing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, s.name)); err != nil {
		return "", fmt.Errorf("renaming the export file: %w", err)
	}
	if d, err := os.Open(s.dir); err == nil {
		err = d.Sync()
		_ = d.Close()
		if err != nil {
			return "", fmt.Errorf("syncing %s: %w", s.dir, err)
		}
	}
	return s.location, nil
}

// Abort removes the partial file.
func (s *fileSink) Abort(context.Context) error {
	_ = s.f.Close()
	if err := os.Remove(s.f.Name()); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("removing %s: %w", s.f.Name(), err)
	}
	return nil
}
