package consensus

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FuzzSnapshotFile feeds arbitrary bytes, as a peer's snapshot stream
// would, to the reader that checks a snapshot file's frame. It must never
// panic, never return more data than the file holds, and accept a file only
// when its frame checks out, in which case the data it returns is the
// file's middle; decompressing that data (Data) never panics either, and
// gives the seed's state back.
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
		again, err := openSnapFileReader(fs, "/f", 9, 2)
		if err != nil {
			t.Fatalf("reopen an accepted file: %v", err)
		}
		defer again.Close()
		plain, err := io.ReadAll(io.LimitReader(again.Data(), 64<<20))
		if len(b) == len(good) && bytes.Equal(b[snapFileHeaderLen:], good[snapFileHeaderLen:]) && (err != nil || string(plain) != "some state") {
			t.Fatalf("the seed reads back as %q, %v", plain, err)
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

// TestSnapshotFileCompressed: a snapshot file holds its data compressed
// (frame version 2, ADR 0034), reads back as written through Data, and a
// version 1 file (the data as it is) is still read.
func TestSnapshotFileCompressed(t *testing.T) {
	st := &Storage{fs: vfs.NewMem(), snapDir: "/s"}
	if err := st.fs.MkdirAll("/s", 0o755); err != nil {
		t.Fatal(err)
	}
	state := bytes.Repeat([]byte(`{"path":"/content/a","message":"the same words again"}`), 64<<10) // 3.5 MiB
	tmp, err := st.writeSnapshotFile(9, 2, func(w io.Writer) error { _, err := w.Write(state); return err })
	if err != nil {
		t.Fatal(err)
	}
	raw, err := readAllFile(st.fs, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > len(state)/10 {
		t.Fatalf("a file of %d bytes for %d bytes of repetitive state: not compressed", len(raw), len(state))
	}
	read := func(path string) []byte {
		t.Helper()
		r, err := openSnapFileReader(st.fs, path, 9, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		data, err := io.ReadAll(r.Data())
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	if got := read(tmp); !bytes.Equal(got, state) {
		t.Fatalf("read back %d bytes, wrote %d", len(got), len(state))
	}

	// The same data as a version 1 file: header, data, trailer.
	v1 := slices.Clone(raw[:snapFileHeaderLen])
	binary.BigEndian.PutUint32(v1[8:], snapFilePlain)
	v1 = append(v1, state...)
	v1 = binary.BigEndian.AppendUint64(v1, uint64(len(state)))
	v1 = binary.BigEndian.AppendUint32(v1, crc32.Checksum(v1, castagnoli))
	f, err := st.fs.Create("/s/v1", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(v1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if got := read("/s/v1"); !bytes.Equal(got, state) {
		t.Fatalf("a version 1 file reads back %d bytes, holds %d", len(got), len(state))
	}
}
