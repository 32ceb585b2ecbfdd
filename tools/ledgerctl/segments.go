package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/contentledger/contentledger/pkg/segarchive"
)

// archiveReport is what verifying one segment archive found.
type archiveReport struct {
	File        string `json:"file"`
	Name        string `json:"name"`
	Segments    int    `json:"segments"`
	FirstIndex  uint64 `json:"firstIndex"`
	LastIndex   uint64 `json:"lastIndex"`
	Bytes       uint64 `json:"bytes"`
	PrevHash    string `json:"prevHash"`
	HeadHash    string `json:"headHash"`
	NodeWrites  int    `json:"nodeWrites"`
	NodeDeletes int    `json:"nodeDeletes"`
	// Compactions are the raft indexes where a compaction started the
	// next generation inside the archive.
	Compactions []uint64 `json:"compactions,omitempty"`
}

func report(file string, s segarchive.Summary) archiveReport {
	return archiveReport{File: file, Name: s.Manifest.Name, Segments: s.Segments, FirstIndex: s.FirstIndex, LastIndex: s.LastIndex,
		Bytes: s.Bytes, PrevHash: "0x" + hex.EncodeToString(s.PrevHash[:]), HeadHash: "0x" + hex.EncodeToString(s.HeadHash[:]),
		NodeWrites: s.NodeWrites, NodeDeletes: s.NodeDeletes, Compactions: s.Compactions}
}

// segments runs "ledgerctl segments list|fetch|verify": the validator's TAR
// files, downloaded as segment archives and checked offline.
func segments(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("segments needs list, fetch or verify")
	}
	fs := flag.NewFlagSet("segments "+args[0], flag.ContinueOnError)
	var c commonFlags
	c.register(fs)
	dir := fs.String("dir", ".", "fetch: directory to write the archives to")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "list":
		return listSegments(ctx, &c, out)
	case "fetch":
		return fetchSegments(ctx, &c, *dir, fs.Args(), out)
	case "verify":
		if fs.NArg() == 0 {
			return errors.New("segments verify needs archive files, in chain order")
		}
		return verifySegments(&c, fs.Args(), out)
	default:
		return fmt.Errorf("unknown segments command %q (list, fetch, verify)", args[0])
	}
}

func listSegments(ctx context.Context, c *commonFlags, out io.Writer) error {
	tars, err := c.client().SegmentTars(ctx)
	if err != nil {
		return describe(err)
	}
	if c.json {
		return printJSON(out, tars)
	}
	fmt.Fprintf(out, "%-16s %10s %10s %9s %12s %-7s %s\n", "NAME", "FIRST", "LAST", "SEGMENTS", "BYTES", "CLOSED", "HEAD")
	for _, f := range tars.Tars {
		fmt.Fprintf(out, "%-16s %10d %10d %9d %12d %-7t %s\n", f.Name, f.FirstIndex, f.LastIndex, f.Segments, f.Bytes, f.Closed, f.HeadHash)
	}
	return nil
}

// fetchSegments downloads TAR files (every one when names is empty) into
// dir, each written under a temporary name and renamed once it verifies;
// consecutive files must chain to each other.
func fetchSegments(ctx context.Context, c *commonFlags, dir string, names []string, out io.Writer) error {
	client := c.client()
	tars, err := client.SegmentTars(ctx)
	if err != nil {
		return describe(err)
	}
	var chain segarchive.Chain
	prev := -2
	var reports []archiveReport
	for _, f := range tars.Tars {
		if len(names) > 0 && !slices.Contains(names, f.Name) {
			continue
		}
		if f.Number != prev+1 {
			chain = segarchive.Chain{} // not the next file: it starts a chain of its own
		}
		prev = f.Number
		path := filepath.Join(dir, f.Name)
		partial := path + ".partial"
		file, err := os.Create(partial)
		if err != nil {
			return err
		}
		_, err = client.SegmentArchive(ctx, f.Name, file)
		if err == nil {
			err = file.Sync()
		}
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(partial)
			return fmt.Errorf("%s: %w", f.Name, describe(err))
		}
		r, err := verifyFile(&chain, partial)
		if err != nil {
			_ = os.Remove(partial)
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		if err := os.Rename(partial, path); err != nil {
			return err
		}
		r.File = path
		reports = append(reports, r)
		if !c.json {
			fmt.Fprintf(out, "%s: %d segments %d-%d, head %s\n", path, r.Segments, r.FirstIndex, r.LastIndex, r.HeadHash)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(reports, func(r archiveReport) bool { return r.Name == n }) {
			return fmt.Errorf("no TAR file %s on %s", n, c.validator)
		}
	}
	if c.json {
		return printJSON(out, reports)
	}
	return nil
}

// verifySegments checks archive files offline, as one chain in the order
// given.
func verifySegments(c *commonFlags, files []string, out io.Writer) error {
	var chain segarchive.Chain
	reports := make([]archiveReport, 0, len(files))
	for _, path := range files {
		r, err := verifyFile(&chain, path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		reports = append(reports, r)
		if !c.json {
			fmt.Fprintf(out, "%s: %s, %d segments %d-%d, %d node writes, %d deletes, chains from %s to %s\n",
				path, r.Name, r.Segments, r.FirstIndex, r.LastIndex, r.NodeWrites, r.NodeDeletes, r.PrevHash, r.HeadHash)
			for _, index := range r.Compactions {
				fmt.Fprintf(out, "%s: a compaction starts the next generation at segment %d\n", path, index)
			}
		}
	}
	if c.json {
		return printJSON(out, reports)
	}
	if last, head, ok := chain.Head(); ok {
		what := fmt.Sprintf("%d archives chain", len(files))
		if len(files) == 1 {
			what = "the archive chains"
		}
		fmt.Fprintf(out, "ok: %s to segment %d, hash 0x%s\n", what, last, hex.EncodeToString(head[:]))
	}
	return nil
}

func verifyFile(chain *segarchive.Chain, path string) (archiveReport, error) {
	f, err := os.Open(path)
	if err != nil {
		return archiveReport{}, err
	}
	defer f.Close()
	s, err := chain.Verify(f)
	if err != nil {
		return archiveReport{}, err
	}
	return report(path, s), nil
}
