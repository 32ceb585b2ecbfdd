package consensus

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FuzzSnapshotFile feeds arbitrary bytes, as a peer's snapshot stream
// would, to the reader that checks a snapshot file's frame. It must never
// panic, never return more data than the file holds, and accept a file only
// when its frame checks out, in which case the data it returns is the
// file's middle.
func FuzzSnapshotFile(f *testing.F) {
	st := &Storage{fs: vfs.NewMem(), snapDir: "/s"}
	if err := st.fs.MkdirAll("/s", 0o755); err != nil {
		f.Fatal(err)
	}
	tmp, err := st.writeSnapshotFile(9, 2, func(w io.Writer) error { _, err := w.Write([]byte("some state")); return err })
	if err != nil {
		f.Fatal(err)
	}
	good, err := readAllFile(st.fs, tmp)
	if err != nil {
		f.Fatal(err)
	}
	// Each seed its own array, so no seed aliases another.
	f.Add(bytes.Clone(good))
	f.Add(bytes.Clone(good[:len(good)-1]))
	f.Add(append(bytes.Clone(good), 0))
	f.Add([]byte("CLRFTSNP"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fs := vfs.NewMem()
		w, err := fs.Create("/f", vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		// A copy: under the race detector MemFS scribbles over what it was
		// given once written.
		if _, err := w.Write(bytes.Clone(b)); err != nil {
			t.Fatal(err)
		}
		w.Close()
		r, err := openSnapFileReader(fs, "/f", 9, 2)
		if err != nil {
			if !errors.Is(err, ErrCorruptLog) {
				t.Fatalf("open: %v does not wrap ErrCorruptLog", err)
			}
			return
		}
		defer r.Close()
		data, err := io.ReadAll(r)
		if len(data) > len(b) {
			t.Fatalf("%d bytes of data from a file of %d", len(data), len(b))
		}
		if err != nil {
			if !errors.Is(err, ErrCorruptLog) {
				t.Fatalf("read: %v does not wrap ErrCorruptLog", err)
			}
			return
		}
		if !bytes.Equal(data, b[snapFileHeaderLen:len(b)-snapFileTrailerLen]) {
			t.Fatalf("accepted data %q differs from the file's middle %q", data, b[snapFileHeaderLen:len(b)-snapFileTrailerLen])
		}
		if len(b) == len(good) && bytes.Equal(b[snapFileHeaderLen:], good[snapFileHeaderLen:]) && string(data) != "some state" {
			t.Fatalf("the seed reads back as %q", data)
		}
	})
}

func readAllFile(fs vfs.FS, path string) ([]byte, error) {
	f, err := fs.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
